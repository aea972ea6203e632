-- The land script, part 1 of 4 (webcrawl/state/scripts.py joins land_head, checks, lifecycle and
-- land):
-- everything a shard learns from a batch of fetches, atomically, in one call per reactor turn:
-- page observations and the change events they produce, a page's lifecycle (gone, removed,
-- moved, restored), attempts (host health and backoff), politeness from finished fetches,
-- listing summaries, sitemap dates, revisit intervals and triggers, Crawl-delays, validator trust.
-- KEYS: pages, validators, due, ready_due, next, delay, health, ready_new, frontier, listing,
--       trust_sitemaps, trust_validators, dirty, records, events, links, checks, op
-- ARGV: op ttl, default delay, sitemap trust (min agreements, max disagreement rate, memory),
--       the time before which no fetch makes its page due again (0: none), event retention
--       seconds, removal confirmation delay, removed-page probe interval, checks kept (0: no
--       check log), then ops, each a code and its arguments (land.lua lists them). Returns
--       REPLY_WIDTH values per op.
local K = {pages = KEYS[1], validators = KEYS[2], due = KEYS[3], ready_due = KEYS[4],
           next = KEYS[5], delay = KEYS[6], health = KEYS[7], ready_new = KEYS[8],
           frontier = KEYS[9], listing = KEYS[10], trust_sitemaps = KEYS[11],
           trust_validators = KEYS[12], dirty = KEYS[13], records = KEYS[14], events = KEYS[15],
           links = KEYS[16], checks = KEYS[17]}
local cached = op_cached(KEYS[18])
if cached then return cached end
local REPLY_WIDTH = 8
local default_delay = tonumber(ARGV[2])
local TS_MIN, TS_MAX, TS_MEMORY = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local NOT_BEFORE = tonumber(ARGV[6]) or 0
local RETENTION, CONFIRM, PROBE = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local CHECKS_KEPT = tonumber(ARGV[10])
local FIRST_OP = 11
local now = server_now()
local out = {}
local rescored = {}

local function member_kind(r)
  if r.kind == KIND_SITEMAP then return 's' end
  return r.kind == KIND_HUB and 'h' or 'p'
end

local function reschedule(r, url, host, due)
  -- r.due is the due member's time while the page is queued, -1 in flight, 0 unscheduled.
  if r.due > 0 then
    due_remove(K.due, host, r.due, member_kind(r), url)
  end
  if due and due > 0 then
    r.due = due
    redis.call('ZADD', K.due, 0, due_member(host, due, member_kind(r), url))
  elseif r.due ~= -1 then
    r.due = 0
  end
  rescored[host] = true
end

local function save(r, url)
  redis.call('HSET', K.pages, url, rec_write(r))
  redis.call('SADD', K.dirty, url)
end
