-- Pop the best request of each domain whose next-allowed time has come (at most `max`), atomically:
-- reschedule each domain at now + its delay and lease the request until now + lease.
-- A domain on the exclusion list (set `excluded`) has its frontier dropped instead.
-- ARGV: prefix, now, default delay, lease seconds, max, excluded
-- Returns: {queued total, leases total, earliest next-allowed time or "", id1, payload1, id2, ...}
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local default_delay = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local max = tonumber(ARGV[5])
local excluded = ARGV[6]
local dropped = 0
local ready = prefix .. 'ready'
local nextk = prefix .. 'next'
local delays = prefix .. 'delay'
local leases = prefix .. 'leases'
local leased = prefix .. 'leased'
local out = {}
local popped = 0
while popped < max do
  local due = redis.call('ZRANGEBYSCORE', ready, '-inf', now, 'LIMIT', 0, 1)
  if #due == 0 then
    break
  end
  local domain = due[1]
  local frontier = prefix .. 'frontier:' .. domain
  if redis.call('SISMEMBER', excluded, domain) == 1 then
    dropped = dropped + redis.call('ZCARD', frontier)
    redis.call('DEL', frontier)
    redis.call('ZREM', ready, domain)
  else
    local item = redis.call('ZPOPMIN', frontier)
    if #item == 0 then
      redis.call('ZREM', ready, domain)
    else
      local member, score = item[1], item[2]
      local delay = tonumber(redis.call('HGET', delays, domain) or default_delay)
      local next_time = now + delay
      redis.call('HSET', nextk, domain, next_time)
      if redis.call('ZCARD', frontier) > 0 then
        redis.call('ZADD', ready, next_time, domain)
      else
        redis.call('ZREM', ready, domain)
      end
      local id = string.sub(member, 1, 16)
      redis.call('ZADD', leases, now + lease, id)
      redis.call('HSET', leased, id, domain .. '\t' .. score .. '\t' .. member)
      popped = popped + 1
      out[#out + 1] = id
      out[#out + 1] = string.sub(member, 18)
    end
  end
end
if dropped > 0 then
  redis.call('DECRBY', prefix .. 'queued', dropped)
  redis.call('INCRBY', prefix .. 'excluded:dropped', dropped)
end
-- (DECRBY, not INCRBY -popped: Lua writes minus zero as "-0", which Redis rejects)
local queued = redis.call('DECRBY', prefix .. 'queued', popped)
local earliest = redis.call('ZRANGE', ready, 0, 0, 'WITHSCORES')
local result = {queued, redis.call('ZCARD', leases), earliest[2] or ''}
for j = 1, #out do
  result[j + 3] = out[j]
end
return result
