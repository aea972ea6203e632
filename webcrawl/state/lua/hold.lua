-- Hold a domain back: its next-allowed time becomes at least `until` (backoff after 429/503,
-- Retry-After, timeouts). Never brings a domain forward.
-- ARGV: prefix, domain, until
local prefix, domain, hold_until = ARGV[1], ARGV[2], tonumber(ARGV[3])
local nextk = prefix .. 'next'
local current = tonumber(redis.call('HGET', nextk, domain) or 0)
if hold_until > current then
  redis.call('HSET', nextk, domain, hold_until)
  redis.call('ZADD', prefix .. 'ready', 'XX', hold_until, domain)
  return 1
end
return 0
