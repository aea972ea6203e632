-- Acknowledge or renew leases, only those the caller owns (a lease reclaimed from a stalled
-- process and popped again has a new id and owner: the stale process can neither extend nor
-- release it).
-- KEYS: leases, leased
-- ARGV: owner, mode ("ack" or "renew"), lease seconds, ids...
-- Returns the number of leases acknowledged or renewed.
local owner, mode, lease = ARGV[1], ARGV[2], tonumber(ARGV[3])
local prefix = owner .. '\t'
local now, done = nil, 0
for j = 4, #ARGV do
  local id = ARGV[j]
  local entry = redis.call('HGET', KEYS[2], id)
  if entry and string.sub(entry, 1, #prefix) == prefix then
    if mode == 'ack' then
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
    else
      now = now or server_now()
      redis.call('ZADD', KEYS[1], 'XX', num(now + lease), id)
    end
    done = done + 1
  end
end
return done
