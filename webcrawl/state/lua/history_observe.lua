-- Record one observation of a page in its history hash, atomically (webcrawl/state/history.py).
-- KEYS[1]: the page's history hash.
-- ARGV: kind ("fetch": a whole response with its record hash; "304": a Not Modified answer),
--       now (fetch time, seconds), record hash (fetch only), cost (bytes on the wire),
--       status, page type, validators ("1": replace the stored ETag / Last-Modified with the
--       next two, an empty one deleted; "0": keep them), etag, last-modified,
--       change age (seconds since the last change by a trusted clock, or ""),
--       nbins, bin base seconds, bins per doubling.
-- Returns {verdict, interval}: verdict "new", "changed" or "unchanged" ("none" for a 304 on a
-- page without history: nothing is observed, the cost is booked); interval "" when none.
-- An observation older than the last one counts an interval of 0 and leaves last_fetched alone.
local key = KEYS[1]
local kind, now, hash = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local cost, status, page_type = tonumber(ARGV[4]), ARGV[5], ARGV[6]
local set_validators, etag, last_modified = ARGV[7], ARGV[8], ARGV[9]
local age = tonumber(ARGV[10])
local nbins, base, per_doubling = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
-- Numbers go to Redis as text; Lua's default conversion keeps only 14 digits.
local function num(x) return string.format('%.17g', x) end

local old = redis.call('HMGET', key, 'last_fetched', 'hash')
local last, previous = tonumber(old[1]), old[2]

redis.call('HINCRBY', key, 'fetches', 1)
if cost and cost > 0 then
  redis.call('HINCRBYFLOAT', key, 'cost', num(cost))
end
if kind == '304' then
  redis.call('HINCRBY', key, 'not_modified', 1)
  if not last then
    return {'none', ''}
  end
end

local verdict, interval
if not last then
  verdict = 'new'
  redis.call('HSET', key, 'first_seen', ARGV[2], 'last_fetched', ARGV[2], 'last_change', ARGV[2])
else
  interval = now - last
  if interval < 0 then
    interval = 0
  else
    redis.call('HSET', key, 'last_fetched', ARGV[2])
  end
  local changed = kind == 'fetch' and previous ~= hash
  -- The sufficient statistics of webcrawl.revisit.history.PageHistory.observe, field by field.
  redis.call('HINCRBY', key, 'visits', 1)
  redis.call('HINCRBYFLOAT', key, 'seconds', num(interval))
  if changed then
    verdict = 'changed'
    redis.call('HINCRBY', key, 'changes', 1)
    redis.call('HSET', key, 'last_change', ARGV[2])
    if age and age >= 0 and age <= interval then
      redis.call('HINCRBY', key, 'exact_changes', 1)
      redis.call('HINCRBYFLOAT', key, 'exact_seconds', num(age))
    else
      local t = math.max(interval, base)
      local b = math.floor(per_doubling * math.log(t / base) / math.log(2))
      b = math.min(math.max(b, 0), nbins - 1)
      redis.call('HINCRBY', key, 'bc:' .. b, 1)
      redis.call('HINCRBYFLOAT', key, 'bs:' .. b, num(interval))
    end
  else
    verdict = 'unchanged'
    redis.call('HINCRBYFLOAT', key, 'unchanged_seconds', num(interval))
  end
  redis.call('HSET', key, 'last_interval', num(interval), 'last_changed', changed and '1' or '0')
end

if kind == 'fetch' then
  redis.call('HSET', key, 'hash', hash)
end
redis.call('HSET', key, 'status', status, 'kind', kind)
if page_type ~= '' then
  redis.call('HSET', key, 'page_type', page_type)
end
if set_validators == '1' then
  if etag ~= '' then redis.call('HSET', key, 'etag', etag) else redis.call('HDEL', key, 'etag') end
  if last_modified ~= '' then
    redis.call('HSET', key, 'last_modified', last_modified)
  else
    redis.call('HDEL', key, 'last_modified')
  end
end
return {verdict, interval and num(interval) or ''}
