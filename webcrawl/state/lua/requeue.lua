-- Put leased requests back into their frontiers, atomically, keeping their place (same score and
-- sequence number). Unless `force` is "1", only leases that have expired by `now` are taken back:
-- a live owner may have renewed one since the caller looked.
-- ARGV: prefix, now, force, id...
-- Returns: number of requests put back
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local force = ARGV[3] == '1'
local leases = prefix .. 'leases'
local leased = prefix .. 'leased'
local ready = prefix .. 'ready'
local nextk = prefix .. 'next'
local back = 0
for j = 4, #ARGV do
  local id = ARGV[j]
  local expiry = redis.call('ZSCORE', leases, id)
  local entry = redis.call('HGET', leased, id)
  if entry and (force or (expiry and tonumber(expiry) <= now)) then
    local tab1 = string.find(entry, '\t', 1, true)
    local tab2 = string.find(entry, '\t', tab1 + 1, true)
    local domain = string.sub(entry, 1, tab1 - 1)
    local score = string.sub(entry, tab1 + 1, tab2 - 1)
    local member = string.sub(entry, tab2 + 1)
    redis.call('ZADD', prefix .. 'frontier:' .. domain, score, member)
    if not redis.call('ZSCORE', ready, domain) then
      local t = tonumber(redis.call('HGET', nextk, domain) or now)
      if t < now then t = now end
      redis.call('ZADD', ready, t, domain)
    end
    redis.call('ZREM', leases, id)
    redis.call('HDEL', leased, id)
    back = back + 1
  end
end
if back > 0 then
  redis.call('INCRBY', prefix .. 'queued', back)
end
return back
