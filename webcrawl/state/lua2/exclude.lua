-- Bring the shard's mirror of the exclusion list to `version` and drop the queued work of hosts
-- newly excluded (their frontier and their revisits).
-- KEYS: excluded, excluded_version, frontier, due, ready_new, ready_due, queued
-- ARGV: version, hosts on the list...
-- Returns the number of queued requests dropped, or -1 when the mirror was already current.
local current = tonumber(redis.call('GET', KEYS[2]) or -1)
local version = tonumber(ARGV[1])
if current >= version then return -1 end
local wanted = {}
for j = 2, #ARGV do wanted[ARGV[j]] = true end
for _, host in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not wanted[host] then redis.call('SREM', KEYS[1], host) end
end
local dropped = 0
for host in pairs(wanted) do
  redis.call('SADD', KEYS[1], host)
  local n = redis.call('ZLEXCOUNT', KEYS[3], '[' .. host .. '\0', '(' .. host .. '\1')
  if n > 0 then
    redis.call('ZREMRANGEBYLEX', KEYS[3], '[' .. host .. '\0', '(' .. host .. '\1')
    redis.call('DECRBY', KEYS[7], n)
    dropped = dropped + n
  end
  redis.call('ZREMRANGEBYLEX', KEYS[4], '[' .. host .. '\0', '(' .. host .. '\1')
  redis.call('ZREM', KEYS[5], host)
  redis.call('ZREM', KEYS[6], host)
end
redis.call('SET', KEYS[2], version)
return dropped
