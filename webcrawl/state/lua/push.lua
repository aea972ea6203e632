-- Push a batch of requests into their domains' frontiers, atomically, and record fetches that
-- finished: a domain's next-allowed time becomes at least (finish time + its delay), so the gap
-- between two requests to a host is never shorter than the delay, however late the first was sent.
-- Domains on the exclusion list (set `excluded`) are refused.
-- ARGV: prefix, now, cap, k (bloom slices), default delay, n, m, excluded, then n entries of
--       domain, score, payload, filter ("1" = test-and-set the seen filter, then k bit offsets),
--       then m finished fetches: domain, finish time
-- Returns: {queued total, leases total, status of entry 1..n}
--   status: 0 already seen (filtered), 1 pushed, 2 pushed and the frontier evicted its worst entry,
--           3 refused: the domain is excluded
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
local k = tonumber(ARGV[4])
local default_delay = tonumber(ARGV[5])
local n = tonumber(ARGV[6])
local m = tonumber(ARGV[7])
local excluded = ARGV[8]
local seen = prefix .. 'seen'
local ready = prefix .. 'ready'
local nextk = prefix .. 'next'
local seq = redis.call('INCRBY', prefix .. 'seq', n) - n
local pushed, evicted = 0, 0
local statuses = {}
local i = 9
for e = 1, n do
  local domain, score, payload, filter = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]
  i = i + 4
  local new = true
  if redis.call('SISMEMBER', excluded, domain) == 1 then
    new = false
    statuses[e] = 3
    if filter == '1' then i = i + k end
  elseif filter == '1' then
    local all_set = true
    for j = 0, k - 1 do
      if redis.call('GETBIT', seen, ARGV[i + j]) == 0 then
        all_set = false
        break
      end
    end
    if all_set then
      new = false
    else
      for j = 0, k - 1 do
        redis.call('SETBIT', seen, ARGV[i + j], 1)
      end
    end
    i = i + k
  end
  if new then
    seq = seq + 1
    local frontier = prefix .. 'frontier:' .. domain
    redis.call('ZADD', frontier, score, string.format('%016d', seq) .. '|' .. payload)
    pushed = pushed + 1
    local status = 1
    if cap > 0 and redis.call('ZCARD', frontier) > cap then
      redis.call('ZPOPMAX', frontier)
      evicted = evicted + 1
      status = 2
    end
    if not redis.call('ZSCORE', ready, domain) then
      local t = tonumber(redis.call('HGET', nextk, domain) or now)
      if t < now then t = now end
      redis.call('ZADD', ready, t, domain)
    end
    statuses[e] = status
  elseif not statuses[e] then
    statuses[e] = 0
  end
end
for f = 1, m do
  local domain, finished = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  local wanted = finished + tonumber(redis.call('HGET', prefix .. 'delay', domain) or default_delay)
  local current = tonumber(redis.call('HGET', nextk, domain) or 0)
  if wanted > current then
    redis.call('HSET', nextk, domain, wanted)
    redis.call('ZADD', ready, 'XX', wanted, domain)
  end
end
local queued = redis.call('INCRBY', prefix .. 'queued', pushed - evicted)
if evicted > 0 then
  redis.call('INCRBY', prefix .. 'evicted', evicted)
end
local result = {queued, redis.call('ZCARD', prefix .. 'leases')}
for e = 1, n do
  result[e + 2] = statuses[e]
end
return result
