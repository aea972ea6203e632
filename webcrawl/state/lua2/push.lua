-- Push a batch of requests into their hosts' frontiers, atomically. A request with filter "1" is
-- first tested against the shard's slice of the seen-URL filter (k bit offsets): seen ones are
-- dropped, new ones mark their bits. A host's frontier past `cap` entries evicts its worst one,
-- which is noted as refused (reason frontier:evicted: its offsets ride in the frontier member)
-- so that it is let in again when met again, not lost to the seen filter.
-- Requests to excluded hosts are refused (and not marked seen).
-- Frontier members: "<host>\0<priority key>\0<seq>|<offsets or ''>|<json>" (common.lua).
-- A seen URL that the crawl refused to fetch (the SSRF guard, robots.txt: its offsets are a field
-- of `refused`, webcrawl/state/refused.py) is let in again, once: it is fetched when the reason
-- is gone, or refused and noted again.
-- KEYS: frontier, ready_new, ready_due, due, next, seen, seen_meta, excluded, queued, seq,
--       refused, refused_at, op
-- ARGV: cap, k, n, op ttl, refused notes kept at most, then n entries: host, priority key,
--       payload, filter, [k offsets]
-- Returns {queued, seen count, status 1..n}: 0 seen, 1 pushed, 2 pushed and evicted another,
--          3 excluded host, 4 pushed again (it had been refused)
local K = {frontier = KEYS[1], ready_new = KEYS[2], ready_due = KEYS[3], due = KEYS[4],
           next = KEYS[5]}
local cached = op_cached(KEYS[13])
if cached then return cached end
local cap, k, n = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local refused_limit = tonumber(ARGV[5])
local seen, excluded, refused, refused_at = KEYS[6], KEYS[8], KEYS[11], KEYS[12]
local now = server_now()
-- Most pushes meet no refused URL at all: one look instead of one per seen URL.
local any_refused = redis.call('EXISTS', refused) == 1
-- Seen-filter generations (webcrawl/state/seen.py): a URL is seen when its bits are set in any
-- generation and is marked in the newest; once that one has taken `capacity` URLs, another of
-- the same size starts `stride` bits further on in the same string.
local sm = redis.call('HMGET', KEYS[7], 'count', 'capacity', 'error_rate', 'generations', 'stride')
local seen_count, seen_cap, seen_rate = tonumber(sm[1] or 0), tonumber(sm[2] or 0), tonumber(sm[3] or 0)
local gens, stride = tonumber(sm[4] or 1), tonumber(sm[5] or 0)
local function seen_grow()
  if stride == 0 then
    local bits = k * math.ceil(seen_cap * math.abs(math.log(seen_rate)) / (k * math.log(2) ^ 2))
    stride = 8 * math.max(redis.call('STRLEN', seen), math.ceil(bits / 8))
  end
  if (gens + 1) * stride <= 4294967296 then
    gens = gens + 1
    redis.call('SETBIT', seen, gens * stride - 1, 0)
    redis.call('HSET', KEYS[7], 'generations', gens, 'stride', stride)
  end
end
local seq = redis.call('INCRBY', KEYS[10], n) - n
local statuses, pushed, evicted, new_urls = {}, 0, 0, 0
local touched = {}
local i = 6
for e = 1, n do
  local host, pkey, payload, filter = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local status = 1
  local fingerprint = ''
  if filter == '1' then
    local offsets = {}
    for j = 0, k - 1 do offsets[j + 1] = ARGV[i + j] end
    fingerprint = table.concat(offsets, ',')
  end
  if redis.call('SISMEMBER', excluded, host) == 1 then
    status = 3
  elseif filter == '1' then
    local all_set = false
    for g = 0, gens - 1 do
      all_set = true
      for j = 0, k - 1 do
        if redis.call('GETBIT', seen, g * stride + ARGV[i + j]) == 0 then all_set = false break end
      end
      if all_set then break end
    end
    if all_set then
      status = 0
      if any_refused and forget_refused(refused, refused_at, fingerprint) == 1 then
        status = 4
      end
    else
      for j = 0, k - 1 do redis.call('SETBIT', seen, (gens - 1) * stride + ARGV[i + j], 1) end
      new_urls = new_urls + 1
      if seen_cap > 0 and seen_count + new_urls >= gens * seen_cap then seen_grow() end
    end
  end
  if filter == '1' then i = i + k end
  if status == 1 or status == 4 then
    seq = seq + 1
    redis.call('ZADD', K.frontier, 0, host .. '\0' .. pkey .. '\0' .. string.format('%012d', seq)
               .. '|' .. fingerprint .. '|' .. payload)
    pushed = pushed + 1
    if cap > 0 and host_count(K.frontier, host) > cap then
      local worst = redis.call('ZREVRANGEBYLEX', K.frontier, '(' .. host .. '\1',
                               '[' .. host .. '\0', 'LIMIT', 0, 1)[1]
      redis.call('ZREM', K.frontier, worst)
      local marked, json = frontier_parts(worst)
      if marked ~= '' then  -- seen already: noted, so that it comes back when met again
        local ok, req = pcall(cjson.decode, json)
        local url = ok and type(req) == 'table' and req.url or ''
        note_refused(refused, refused_at, marked, 'frontier:evicted\t' .. url .. '\t' .. num(now),
                     now, refused_limit)
      end
      evicted = evicted + 1
      status = 2
    end
    touched[host] = true
  end
  statuses[e] = status
end
for host in pairs(touched) do
  if not redis.call('ZSCORE', K.ready_new, host) then rescore(K, host) end
end
local queued = redis.call('INCRBY', KEYS[9], pushed - evicted)
local count = redis.call('HINCRBY', KEYS[7], 'count', new_urls)
local result = {queued, count}
for e = 1, n do result[e + 2] = statuses[e] end
return op_store(KEYS[13], tonumber(ARGV[4]), result)
