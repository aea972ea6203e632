-- The seen-URL filter of a shard (webcrawl/state/seen.py): a scalable bloom filter in one Redis
-- string, `bitmap`, recorded in the hash `meta`. The one copy of its rules: the push script and
-- SeenFilter's scripts both include this file. SEEN_DEFAULTS (capacity, error rate, growth,
-- tightening, as strings) and SEEN_MIN_SLICE are prepended by seen.py: the sizes a filter takes
-- when nothing recorded it first, and the fewest bits of a slice.
--
-- meta: capacity (URLs of the first generation), error_rate (the bound on false positives, all
-- generations together), growth (each generation holds `growth` times the URLs of the one
-- before), tightening (and is sized for `tightening` times the false-positive rate of the one
-- before), generations, sizes ("k:m" of each generation: k slices of m bits, recorded when the
-- generation is made, so its bit positions never depend on this server's floating point), count
-- (URLs taken in as new). Generation g is sized for p_g = error_rate * (1 - t) * t^g, so that
-- all of them together stay under error_rate, with slices of at least SEEN_MIN_SLICE bits (in
-- smaller ones the bits of a URL's slices are not independent enough, and false positives pass
-- the sizing); it starts where the one before ends (rounded up to a byte) and is allocated at
-- once when the one before has taken its capacity.
-- A URL's key is three 40-bit words h1, h2, h3; its bit in slice i of a generation is
-- i * m + (h1 + i * h2 + i^2 * h3) % m (triple hashing: two URLs land on the same k bits with a
-- chance of 1/m^3, where double hashing's 1/m^2 would dominate the false positives of small
-- generations; with k < 64 every value stays an exact integer in Lua's doubles). A URL is seen
-- when all its k bits are set in any generation; a new one is marked in the newest.
--
-- A filter made before this layout has `capacity` but no `growth`: equal generations `stride`
-- bits apart, each sized for `capacity` URLs at `error_rate`, and a URL's key is its k bit
-- offsets in a generation (pybloom-live's). It is read and grown as it was.

local SEEN_MAX_BITS = 4294967296   -- a Redis string holds 512 MB
-- A bitmap under this size grows by a copy to its exact size (SETBIT on an existing string lets
-- Redis allocate up to twice the length below 1 MB, and 1 MB more above it).
local SEEN_COPY_BYTES = 8388608

local function seen_bytes(bits) return math.ceil(bits / 8) end

-- k and m of generation g of a scalable filter `s`.
local function seen_size(s, g)
  local p = s.rate * (1 - s.tightening) * s.tightening ^ g
  local k = math.ceil(math.log(1 / p) / math.log(2))
  local m = math.ceil(s.capacity * s.growth ^ g * math.abs(math.log(p)) / (k * math.log(2) ^ 2))
  return k, math.max(m, SEEN_MIN_SLICE)
end

-- Generation g (1-based here) of k slices of m bits joins s's tables.
local function seen_take(s, k, m)
  local g = s.gens + 1
  s.gens, s.k[g], s.m[g], s.start[g] = g, k, m, s.stop
  s.stop = s.stop + 8 * seen_bytes(k * m)
  s.full = s.full + s.capacity * s.growth ^ (g - 1)
end

local function seen_alloc(key, bytes)
  local have = redis.call('STRLEN', key)
  if have >= bytes then return end
  if bytes <= SEEN_COPY_BYTES and have > 0 then
    redis.call('SET', key, redis.call('GET', key) .. string.rep('\0', bytes - have))
  else
    redis.call('SETBIT', key, bytes * 8 - 1, 0)
  end
end

-- Start the next generation of a scalable filter; false when it would not fit in a string.
local function seen_grow(s)
  local k, m = seen_size(s, s.gens)
  if s.stop + 8 * seen_bytes(k * m) > SEEN_MAX_BITS then
    s.maxed = true
    return false
  end
  seen_take(s, k, m)
  seen_alloc(s.key, s.stop / 8)
  s.sizes = (s.sizes == '' and '' or s.sizes .. ' ') .. string.format('%d:%d', k, m)
  redis.call('HSET', s.meta, 'generations', s.gens, 'sizes', s.sizes)
  return true
end

-- Record a filter that nothing recorded yet: sizes = {capacity, error_rate, growth, tightening}.
local function seen_record(meta, sizes)
  redis.call('HSET', meta, 'capacity', sizes[1], 'error_rate', sizes[2], 'growth', sizes[3],
             'tightening', sizes[4])
end

-- The filter's state for one script call. `writing`: a filter not recorded yet is recorded with
-- SEEN_DEFAULTS, and a scalable one without a generation gets its first.
local function seen_open(bitmap, meta, writing)
  local f = redis.call('HMGET', meta, 'count', 'capacity', 'error_rate', 'generations', 'stride',
                       'growth', 'tightening', 'sizes')
  local s = {key = bitmap, meta = meta, count = tonumber(f[1] or 0), added = 0}
  if f[2] and not f[6] then
    s.legacy = true
    s.capacity, s.rate = tonumber(f[2]), tonumber(f[3] or 0)
    s.gens, s.stride = tonumber(f[4] or 1), tonumber(f[5] or 0)
    return s
  end
  if not f[2] then
    if writing then seen_record(meta, SEEN_DEFAULTS) end
    f = {f[1], SEEN_DEFAULTS[1], SEEN_DEFAULTS[2], nil, nil, SEEN_DEFAULTS[3], SEEN_DEFAULTS[4], nil}
  end
  s.capacity, s.rate = tonumber(f[2]), tonumber(f[3])
  s.growth, s.tightening = tonumber(f[6]), tonumber(f[7])
  s.k, s.m, s.start, s.gens, s.stop, s.full, s.sizes = {}, {}, {}, 0, 0, 0, f[8] or ''
  for k, m in string.gmatch(s.sizes, '(%d+):(%d+)') do seen_take(s, tonumber(k), tonumber(m)) end
  if writing and s.gens == 0 then seen_grow(s) end
  return s
end

-- Whether a URL's key of `n` words fits the filter (three words for a scalable one).
local function seen_fits(s, n)
  return s.legacy or n == 3
end

-- The bit of slice i of generation g for the key h1, h2, h3.
local function seen_bit(s, g, i, h1, h2, h3)
  local m = s.m[g]
  return s.start[g] + i * m + (h1 + i * (h2 + i * h3)) % m
end

-- Whether the URL whose key is ARGV[a .. a + n - 1] is (probably) in the filter.
local function seen_test(s, a, n)
  if s.legacy then
    for g = 0, s.gens - 1 do
      local all = true
      for j = 0, n - 1 do
        if redis.call('GETBIT', s.key, g * s.stride + ARGV[a + j]) == 0 then all = false break end
      end
      if all then return true end
    end
    return false
  end
  local h1, h2, h3 = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  for g = s.gens, 1, -1 do  -- the newest first: it holds most URLs
    local all = true  -- (GETBIT a bit: three times faster than a BITFIELD of the k)
    for i = 0, s.k[g] - 1 do
      if redis.call('GETBIT', s.key, seen_bit(s, g, i, h1, h2, h3)) == 0 then all = false break end
    end
    if all then return true end
  end
  return false
end

-- Take in a URL found new: mark it in the newest generation, count it, and grow when that
-- generation is full.
local function seen_mark(s, a, n)
  s.count, s.added = s.count + 1, s.added + 1
  if s.legacy then
    local base = (s.gens - 1) * s.stride
    for j = 0, n - 1 do redis.call('SETBIT', s.key, base + ARGV[a + j], 1) end
    if s.capacity > 0 and s.count >= s.gens * s.capacity then
      if s.stride == 0 then
        local bits = n * math.ceil(s.capacity * math.abs(math.log(s.rate)) / (n * math.log(2) ^ 2))
        s.stride = 8 * math.max(redis.call('STRLEN', s.key), math.ceil(bits / 8))
      end
      if (s.gens + 1) * s.stride <= SEEN_MAX_BITS then
        s.gens = s.gens + 1
        redis.call('SETBIT', s.key, s.gens * s.stride - 1, 0)
        redis.call('HSET', s.meta, 'generations', s.gens, 'stride', s.stride)
      end
    end
    return
  end
  local h1, h2, h3 = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  for i = 0, s.k[s.gens] - 1 do
    redis.call('SETBIT', s.key, seen_bit(s, s.gens, i, h1, h2, h3), 1)
  end
  if s.count >= s.full and not s.maxed then seen_grow(s) end
end

-- Store the count; returns it.
local function seen_close(s)
  if s.added == 0 then return s.count end
  return redis.call('HINCRBY', s.meta, 'count', s.added)
end
