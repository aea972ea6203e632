-- Fold one cycle's ledger into the crawl's rolled-up summary, once (crawl-wide slot). Its amounts
-- (budget, booked, idle, spent:*, fetches:*, cost:*, the verdicts per page type, ...) are added to
-- the summary's; its snapshots (times, rate, coverage and freshness at its close, what the
-- allocator last decided) are dropped. The summary keeps how many cycles it holds, the first and
-- last of them, when the first started and when the last ended. The cycle's hash and its workers
-- go, and its id leaves the cycles index. A cycle already rolled up (no hash) adds nothing.
-- KEYS: cycle hash, its workers zset, cycles zset, rolled-up hash
-- ARGV: cycle id
local SNAPSHOTS = {started = true, ends = true, rate = true, known = true, fetched = true,
                   waiting = true, never_fetched = true, granted = true, freshness = true,
                   freshness_value = true, freshness_mean = true, freshness_value_mean = true}
local PREFIXES = {'freshness:', 'pages:', 'alloc:', 'planned:'}

local function snapshot(field)
  if SNAPSHOTS[field] then return true end
  for _, prefix in ipairs(PREFIXES) do
    if string.sub(field, 1, #prefix) == prefix then return true end
  end
  return false
end

local id = tonumber(ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[2])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local fields = redis.call('HGETALL', KEYS[1])
local started, ends
for j = 1, #fields, 2 do
  local field, value = fields[j], fields[j + 1]
  if field == 'started' then started = value
  elseif field == 'ends' then ends = value
  elseif not snapshot(field) then
    local n = tonumber(value)
    if n and n == n and n ~= math.huge and n ~= -math.huge then
      redis.call('HINCRBYFLOAT', KEYS[4], field, value)
    end
  end
end
redis.call('HINCRBY', KEYS[4], 'cycles', 1)
local first = tonumber(redis.call('HGET', KEYS[4], 'first'))
if not first or id < first then
  redis.call('HSET', KEYS[4], 'first', ARGV[1], 'started', started or '0')
end
local last = tonumber(redis.call('HGET', KEYS[4], 'last'))
if not last or id > last then
  redis.call('HSET', KEYS[4], 'last', ARGV[1], 'ends', ends or started or '0')
end
redis.call('DEL', KEYS[1])
return 1
