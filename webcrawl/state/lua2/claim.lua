-- Claim a host's next fetch slot for a request that did not come out of the queue (a robots.txt
-- fetch, a download made by a component): if the host's next-allowed time has come, it becomes
-- now + the host's delay and the caller may go (0); otherwise the caller must wait the seconds
-- returned and ask again.
-- KEYS: next, delay, frontier, due, ready_new, ready_due
-- ARGV: host, default delay
local K = {next = KEYS[1], delay = KEYS[2], frontier = KEYS[3], due = KEYS[4], ready_new = KEYS[5],
           ready_due = KEYS[6]}
local host = ARGV[1]
local now = server_now()
local nxt = tonumber(redis.call('HGET', K.next, host) or 0)
if nxt > now then return num(nxt - now) end
redis.call('HSET', K.next, host, num(now + delay_of(K, host, tonumber(ARGV[2]))))
rescore(K, host)
return '0'
