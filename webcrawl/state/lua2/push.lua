-- Push a batch of requests into their hosts' frontiers, atomically. A request with filter "1" is
-- first tested against the shard's slice of the seen-URL filter (its key of k words, seen.lua):
-- seen ones are dropped, new ones are taken in. A host's frontier past `cap` entries evicts its
-- worst one, which is noted as refused (reason frontier:evicted: its seen-filter key rides in the
-- frontier member) so that it is let in again when met again, not lost to the seen filter.
-- Requests to excluded hosts are refused (and not marked seen).
-- Frontier members: "<host>\0<priority key>\0<seq>|<offsets or ''>|<json>" (common.lua).
-- A seen URL that the crawl refused to fetch (the SSRF guard, robots.txt: its offsets are a field
-- of `refused`, webcrawl/state/refused.py) is let in again, once: it is fetched when the reason
-- is gone, or refused and noted again.
-- KEYS: frontier, ready_new, ready_due, due, next, seen, seen_meta, excluded, queued, seq,
--       refused, refused_at, op
-- ARGV: cap, k (words of a seen-filter key; 0 when no entry is filtered), n, op ttl, refused
--       notes kept at most, then n entries: host, priority key, payload, filter, [k words]
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
local S = seen_open(seen, KEYS[7], k > 0)
if k > 0 and not seen_fits(S, k) then
  return redis.error_reply('seen filter: keys of ' .. k .. ' words for a filter that takes 3')
end
local seq = redis.call('INCRBY', KEYS[10], n) - n
local statuses, pushed, evicted = {}, 0, 0
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
    if seen_test(S, i, k) then
      status = 0
      if any_refused and forget_refused(refused, refused_at, fingerprint) == 1 then
        status = 4
      end
    else
      seen_mark(S, i, k)
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
local count = seen_close(S)
local result = {queued, count}
for e = 1, n do result[e + 2] = statuses[e] end
return op_store(KEYS[13], tonumber(ARGV[4]), result)
