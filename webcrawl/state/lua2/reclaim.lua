-- Put leased work back where it was: queued requests into their frontier (same place in line),
-- revisits into the due queue (same due time). Mode "expired": at most ARGV batch leases whose
-- expiry has passed (their owner died or stalled); mode "owned": the listed ids the caller owns
-- (a process closing before its requests were done).
-- KEYS: leases, leased, frontier, due, ready_new, ready_due, next, queued, pages
-- ARGV: mode, owner or '', batch, ids (mode owned)...
-- Returns the number of leases put back.
local K = {frontier = KEYS[3], due = KEYS[4], ready_new = KEYS[5], ready_due = KEYS[6],
           next = KEYS[7], pages = KEYS[9]}
local mode, owner = ARGV[1], ARGV[2]
local ids
if mode == 'expired' then
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', server_now(), 'LIMIT', 0, tonumber(ARGV[3]))
else
  ids = {}
  for j = 4, #ARGV do ids[#ids + 1] = ARGV[j] end
end
local back, hosts = 0, {}
for _, id in ipairs(ids) do
  local entry = redis.call('HGET', KEYS[2], id)
  if entry then
    local o, kind, host, member = string.match(entry, '^([^\t]*)\t(%a)\t([^\t]*)\t(.*)$')
    if mode == 'expired' or o == owner then
      if kind == 'n' then
        redis.call('ZADD', K.frontier, 0, member)
        redis.call('INCRBY', KEYS[8], 1)
      else
        -- Back into the due queue unless the fetch landed meanwhile (it rescheduled the page).
        local _, due, _, url = due_parts(member)
        local raw = redis.call('HGET', K.pages, url)
        local r = raw and rec_read(raw)
        if not r or r.due == -1 then
          redis.call('ZADD', K.due, 0, member)
          if r then
            r.due = due
            redis.call('HSET', K.pages, url, rec_write(r))
          end
        end
      end
      redis.call('ZREM', KEYS[1], id)
      redis.call('HDEL', KEYS[2], id)
      hosts[host] = true
      back = back + 1
    end
  end
end
for host in pairs(hosts) do rescore(K, host) end
return back
