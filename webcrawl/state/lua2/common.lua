-- Shared by the shard scripts (prepended by webcrawl/state/scripts.py, after the record helpers).
-- Members: frontier "<host>\0<priority key>\0<seq>|<seen-filter offsets, or ''>|<json>" (before
-- layout 3: "...<seq>|<json>"), due "<host>\0<class><due ms>\0<kind><url without scheme and
-- host>" (due_member).
local function server_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1e6
end

local function num(x) return string.format('%.17g', x) end

-- A frontier member's seen-filter offsets ('' when none: a request not filtered, or a member of
-- the earlier layout) and its request's JSON.
local function frontier_parts(member)
  local first = string.find(member, '|', 1, true)
  if string.sub(member, first + 1, first + 1) == '{' then  -- the earlier layout
    return '', string.sub(member, first + 1)
  end
  local second = string.find(member, '|', first + 1, true)
  return string.sub(member, first + 1, second - 1), string.sub(member, second + 1)
end

local function host_first(key, host)
  local m = redis.call('ZRANGEBYLEX', key, '[' .. host .. '\0', '(' .. host .. '\1', 'LIMIT', 0, 1)
  return m[1]
end

local function host_count(key, host)
  return redis.call('ZLEXCOUNT', key, '[' .. host .. '\0', '(' .. host .. '\1')
end

-- Due members sort by host, then class ('0': sitemaps and hubs, read on time even on a host that
-- lags behind its revisits, since they find new pages; '1': pages), then due time. Kinds: 's'
-- sitemap, 'h' hub (a page without a page type read for the typed pages it links), 'p' page.
-- The URL is kept without its "https://<host>" ('~' in its place) or "http://<host>" ('^'): the
-- member starts with the host already (layouts before 4 kept the whole URL, still read).
local function due_url(host, url)
  local n = #host
  if string.sub(url, 1, 8 + n) == 'https://' .. host then return '~' .. string.sub(url, 9 + n) end
  if string.sub(url, 1, 7 + n) == 'http://' .. host then return '^' .. string.sub(url, 8 + n) end
  return url
end

local function due_prefix(host, due, kind)
  local class = (kind == 's' or kind == 'h') and '0' or '1'
  return host .. '\0' .. class .. string.format('%013d', math.floor(due * 1000 + 0.5)) .. '\0' .. kind
end

local function due_member(host, due, kind, url)
  return due_prefix(host, due, kind) .. due_url(host, url)
end

-- Take a page's due member out (in the form of either layout).
local function due_remove(key, host, due, kind, url)
  local prefix = due_prefix(host, due, kind)
  redis.call('ZREM', key, prefix .. due_url(host, url), prefix .. url)
end

-- host, due (seconds), kind, url of a due member
local function due_parts(member)
  local a = string.find(member, '\0', 1, true)
  local b = string.find(member, '\0', a + 1, true)
  local host, url = string.sub(member, 1, a - 1), string.sub(member, b + 2)
  local mark = string.sub(url, 1, 1)
  if mark == '~' then
    url = 'https://' .. host .. string.sub(url, 2)
  elseif mark == '^' then
    url = 'http://' .. host .. string.sub(url, 2)
  end
  return host, tonumber(string.sub(member, a + 2, b - 1)) / 1000, string.sub(member, b + 1, b + 1), url
end

-- The field of a page in `records` and `validators`: 8 bytes of the SHA-1 of its URL (the URL
-- itself would take some 70 bytes more a page). Layouts before 4 used the URL: read when the
-- page's key is not there, and deleted with it.
local function page_key(url)
  return (string.gsub(string.sub(redis.sha1hex(url), 1, 16), '..',
                      function(x) return string.char(tonumber(x, 16)) end))
end

local function page_get(hash, url)
  return redis.call('HGET', hash, page_key(url)) or redis.call('HGET', hash, url)
end

local function page_del(hash, url)
  redis.call('HDEL', hash, page_key(url), url)
end

-- The host's due member to take at `now`: a sitemap due by then, else its earliest member of
-- either class (which may not be due yet; with now = nil, simply the earliest).
local function due_next(key, host, now)
  local prefix = host .. '\0'
  local s = redis.call('ZRANGEBYLEX', key, '[' .. prefix .. '0', '(' .. prefix .. '1', 'LIMIT', 0, 1)[1]
  local ds = s and select(2, due_parts(s))
  if s and now and ds <= now then return s end
  local p = redis.call('ZRANGEBYLEX', key, '[' .. prefix .. '1', '(' .. host .. '\1', 'LIMIT', 0, 1)[1]
  if not s then return p end
  if not p then return s end
  return (ds <= select(2, due_parts(p))) and s or p
end

-- K: table with frontier, due, next, ready_new, ready_due key names.
-- Recompute a host's places in both ready queues from its next-allowed time and its work.
local function rescore(K, host)
  local nxt = tonumber(redis.call('HGET', K.next, host) or 0)
  if host_first(K.frontier, host) then
    redis.call('ZADD', K.ready_new, nxt, host)
  else
    redis.call('ZREM', K.ready_new, host)
  end
  local first = due_next(K.due, host, nil)
  if first then
    local _, due = due_parts(first)
    redis.call('ZADD', K.ready_due, math.max(nxt, due), host)
  else
    redis.call('ZREM', K.ready_due, host)
  end
end

local function delay_of(K, host, default_delay)
  return tonumber(redis.call('HGET', K.delay, host) or default_delay)
end

-- Idempotency: a call with an op id whose answer is kept returns it again, doing nothing.
local function op_cached(key)
  if key == nil or key == '' then return nil end
  local raw = redis.call('GET', key)
  if raw then return cmsgpack.unpack(raw) end
  return nil
end

local function op_store(key, ttl, result)
  if key ~= nil and key ~= '' then
    redis.call('SET', key, cmsgpack.pack(result), 'EX', ttl)
  end
  return result
end
