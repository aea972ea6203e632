-- Notes of refused URLs (webcrawl/state/refused.py), for the scripts that write them: `refused`
-- maps a URL's seen-filter offsets ("o1,...,ok") to "reason\turl\ttime", `refused:at` orders them
-- by time; past `limit` notes the oldest go, so a new refusal is always noted (an old one, met
-- again, is queued again only while noted).

local function note_refused(refused, refused_at, fingerprint, value, at, limit)
  if limit <= 0 then return end
  redis.call('HSET', refused, fingerprint, value)
  redis.call('ZADD', refused_at, at, fingerprint)
  local over = redis.call('ZCARD', refused_at) - limit
  if over > 0 then
    local old = redis.call('ZPOPMIN', refused_at, over)
    for j = 1, #old, 2 do redis.call('HDEL', refused, old[j]) end
  end
end

-- Forget a note (its URL is let in again); 1 when there was one.
local function forget_refused(refused, refused_at, fingerprint)
  redis.call('ZREM', refused_at, fingerprint)
  return redis.call('HDEL', refused, fingerprint)
end
