-- Pop work from the hosts whose turn has come, atomically, at most ARGV max items, one per host
-- visit: each popped item sets its host's next-allowed time to now + the host's delay and leases
-- the item to its owner until now + lease seconds.
-- Two kinds of work: "n" (new: the host's frontier of queued requests) and "d" (due: known pages
-- whose revisit time has come). ARGV order lists the kinds in the caller's preference ("dn", "nd",
-- "d" or "n"); for each item the first kind with a host ready now is taken.
-- A host whose turn came with both kinds of work waiting gives every `share`-th turn to the kind
-- the order does not prefer: new URLs on a host kept busy by revisits are still found, and the
-- other way round (a per-host turn counter in the `next` hash).
-- A host on the exclusion list has its frontier and revisits dropped instead.
-- KEYS: ready_new, ready_due, frontier, due, next, delay, leases, leased, excluded, queued, pages,
--       validators, links, op
-- Revisits due within ARGV ahead seconds may come out early (a caller whose money would otherwise
-- sit idle), on hosts whose turn has come, earliest first, and only when no host has work of
-- either kind ready now (new URLs waiting go first).
-- ARGV: owner, first lease number, max, order, default delay, lease seconds, op ttl, share, ahead
-- Returns {now, queued, earliest new, earliest due, dropped, then per item:
--          lease id, kind, payload (n) or url (d), page record or '', validators or '', delay, host,
--          the typed pages a listing page or hub showed at its latest reading (d) or ''}
local K = {ready_new = KEYS[1], ready_due = KEYS[2], frontier = KEYS[3], due = KEYS[4],
           next = KEYS[5], delay = KEYS[6], leases = KEYS[7], leased = KEYS[8],
           excluded = KEYS[9], queued = KEYS[10], pages = KEYS[11], validators = KEYS[12],
           links = KEYS[13]}
local cached = op_cached(KEYS[14])
if cached then return cached end
local owner, counter, max, order = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local default_delay, lease = tonumber(ARGV[5]), tonumber(ARGV[6])
local share = tonumber(ARGV[8] or 0)
local ahead = tonumber(ARGV[9] or 0)
local now = server_now()
local out, popped, dropped = {}, 0, 0

local function drop_host(host)
  local n = host_count(K.frontier, host)
  if n > 0 then
    redis.call('ZREMRANGEBYLEX', K.frontier, '[' .. host .. '\0', '(' .. host .. '\1')
    redis.call('DECRBY', K.queued, n)
  end
  redis.call('ZREMRANGEBYLEX', K.due, '[' .. host .. '\0', '(' .. host .. '\1')
  redis.call('ZREM', K.ready_new, host)
  redis.call('ZREM', K.ready_due, host)
  dropped = dropped + n
end

local guard = 0
while popped < max and guard < 4 * max + 16 do
  guard = guard + 1
  local host, kind
  for i = 1, #order do
    local k = string.sub(order, i, i)
    local ready = k == 'n' and K.ready_new or K.ready_due
    local h = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, 1)[1]
    if h then host, kind = h, k break end
  end
  if not host and ahead > 0 and string.find(order, 'd', 1, true) then
    -- Early revisits, only when no work of either kind is ready now: a host whose first
    -- revisit is due soon and whose turn has come.
    local soon = redis.call('ZRANGEBYSCORE', K.ready_due, '-inf', now + ahead, 'LIMIT', 0, 16)
    for _, c in ipairs(soon) do
      if tonumber(redis.call('HGET', K.next, c) or 0) <= now then host, kind = c, 'd' break end
    end
  end
  if not host then break end
  if redis.call('SISMEMBER', K.excluded, host) == 1 then
    drop_host(host)
  else
    if share > 0 and #order == 2 then
      local other = kind == 'n' and 'd' or 'n'
      local ready = other == 'n' and K.ready_new or K.ready_due
      local at = redis.call('ZSCORE', ready, host)
      if at and tonumber(at) <= now then
        local turn = redis.call('HINCRBY', K.next, host .. '\0turns', 1)
        if turn % share == 0 then kind = other end
      end
    end
    local member, item, record, validators, links = nil, nil, '', '', ''
    if kind == 'n' then
      member = host_first(K.frontier, host)
      if member then
        redis.call('ZREM', K.frontier, member)
        redis.call('DECRBY', K.queued, 1)
        local _, json = frontier_parts(member)
        item = json
      end
    else
      member = due_next(K.due, host, now)
      if member then
        local _, due, letter, url = due_parts(member)
        if due > now + ahead then
          member = nil  -- not due yet after all (a stale ready score): rescored below
        else
          redis.call('ZREM', K.due, member)
          item = letter .. url
          local raw = redis.call('HGET', K.pages, url)
          if raw then
            local r = rec_read(raw)
            r.due = -1  -- in flight: the allocator leaves its schedule to the landing
            record = rec_write(r)
            redis.call('HSET', K.pages, url, record)
          end
          validators = page_get(K.validators, url) or ''
          links = redis.call('HGET', K.links, url) or ''
        end
      end
    end
    if member then
      local delay = delay_of(K, host, default_delay)
      redis.call('HSET', K.next, host, num(now + delay))
      local id = owner .. ':' .. counter
      counter = counter + 1
      redis.call('ZADD', K.leases, num(now + lease), id)
      redis.call('HSET', K.leased, id, owner .. '\t' .. kind .. '\t' .. host .. '\t' .. member)
      popped = popped + 1
      local o = #out
      out[o + 1], out[o + 2], out[o + 3], out[o + 4] = id, kind, item, record
      out[o + 5], out[o + 6], out[o + 7], out[o + 8] = validators, num(delay), host, links
    end
    rescore(K, host)
  end
end

local function first_score(key)
  local e = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
  return e[2] or ''
end
local result = {num(now), tonumber(redis.call('GET', K.queued) or 0), first_score(K.ready_new),
                first_score(K.ready_due), dropped}
for j = 1, #out do result[j + 5] = out[j] end
return op_store(KEYS[14], tonumber(ARGV[7]), result)
