-- The crawl's shared spend bucket (crawl-wide slot): tokens in the site's cost unit, refilled at
-- `rate` per second up to `cap`. Tokens that would overflow the cap are counted as `wasted` (the
-- budget went unused: nothing was due or ready to spend it on).
-- KEYS: bucket, op
-- ARGV: action, its arguments (below), then the op ttl (seconds the answer is kept for a retry)
--   take want            -> {granted, tokens left, rate}   (grants at most what is there, >= 0)
--   give amount          -> {0, tokens, rate}              (unused tokens back, or a correction;
--                                                           a negative amount charges overspend)
--   configure rate cap cycle reset_tokens ('' keeps them)  -> {0, tokens, rate}
--   read                 -> {0, tokens, rate, cap, wasted, granted, cycle}
if KEYS[2] ~= nil and string.sub(KEYS[2], -2) ~= ':-' then
  local raw = redis.call('GET', KEYS[2])
  if raw then return cmsgpack.unpack(raw) end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local function num(x) return string.format('%.17g', x) end
local b = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'rate', 'cap', 'wasted', 'granted', 'cycle')
local tokens, at, rate, cap = tonumber(b[1] or 0), tonumber(b[2] or now), tonumber(b[3] or 0),
                              tonumber(b[4] or 0)
local wasted, granted, cycle = tonumber(b[5] or 0), tonumber(b[6] or 0), b[7] or ''
if now > at and rate > 0 then
  local add, room = rate * (now - at), math.max(cap - tokens, 0)
  if add > room then
    wasted = wasted + (add - room)
    add = room
  end
  tokens = tokens + add
end
local action = ARGV[1]
local result
if action == 'take' then
  local grant = math.min(tonumber(ARGV[2]), math.max(tokens, 0))
  tokens = tokens - grant
  granted = granted + grant
  result = {num(grant), num(tokens), num(rate)}
elseif action == 'give' then
  tokens = tokens + tonumber(ARGV[2])
  if tonumber(ARGV[2]) > 0 and tokens > cap and rate > 0 then
    wasted = wasted + (tokens - cap)
    tokens = cap
  end
  result = {'0', num(tokens), num(rate)}
elseif action == 'configure' then
  rate, cap, cycle = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
  if ARGV[5] ~= '' then
    tokens, wasted, granted = tonumber(ARGV[5]), 0, 0
  end
  result = {'0', num(tokens), num(rate)}
else
  result = {'0', num(tokens), num(rate), num(cap), num(wasted), num(granted), cycle}
end
redis.call('HSET', KEYS[1], 'tokens', num(tokens), 'at', num(now), 'rate', num(rate), 'cap', num(cap),
           'wasted', num(wasted), 'granted', num(granted), 'cycle', cycle)
if KEYS[2] ~= nil and string.sub(KEYS[2], -2) ~= ':-' then
  redis.call('SET', KEYS[2], cmsgpack.pack(result), 'EX', tonumber(ARGV[#ARGV]))
end
return result
