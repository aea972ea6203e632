-- The land script, part 3 of 4: change events and the page lifecycle.
--
-- A change event is written to the shard's stream `events` in the same call as the verdict that
-- makes it, so a verdict is never recorded without its event (webcrawl/state/eventlog.py reads
-- the stream; docs/events.md has the contract). Entry fields:
--   k kind (new|changed|removed|moved|restored), s site, t page type, u URL as fetched,
--   c canonical URL ('' when it is u), d detected_at, f previous_fetch_at ('' for new), r record ('' for removed),
--   p previous record ('' when unknown), m moved_to, h status, b body pointer, v volatile fields
-- Records are opaque here (compact JSON made by webcrawl/change/events.py). The stream keeps
-- RETENTION seconds of events: each XADD trims older ones (MINID).
-- `records` holds each typed page's latest record: the `previous` of its next event.
--
-- Lifecycle (a page record's `state`): ALIVE; a known page answering 404/410 becomes SUSPECT, due
-- again after CONFIRM seconds; a second 404/410 makes it REMOVED (event `removed`), probed every
-- PROBE seconds; a 200 brings it back (event `restored`). A 301/308 from a known page hands its
-- history to the URL it led to (event `moved`) and retires it (MOVED: never due again).

-- e: the event arguments of an op (land.lua reads them from ARGV). Returns the entry's id and
-- its fields as JSON (the caller's own copy of what was recorded: its feed item).
local function emit(kind, e, fetched, canonical, time, previous_at, previous, record, moved_to)
  local cutoff = string.format('%d', math.floor((now - RETENTION) * 1000))
  local fields = {'k', kind, 's', e.site, 't', e.page_type, 'u', fetched,
                  'c', canonical == fetched and '' or canonical,
                  'd', num(time), 'f', previous_at and num(previous_at) or '', 'r', record,
                  'p', previous, 'm', moved_to, 'h', e.status, 'b', e.pointer, 'v', e.volatile}
  local id = redis.call('XADD', K.events, 'MINID', cutoff, '*', unpack(fields))
  return id, cjson.encode(fields)
end

-- A page leaves the plan for good: its history now lives at another URL.
local function retire(r, url, host)
  if r.due == -1 then r.due = 0 end
  reschedule(r, url, host, nil)
  r.state = MOVED
  save(r, url)
  page_del(K.records, url)
  page_del(K.validators, url)
  redis.call('HDEL', K.links, url)
end

-- The page `e.moved_from` answered a 301/308 that led to the page observed now: its record and
-- latest record, retired here when it lives in this shard, or as another shard gave them up (a Y
-- op there, its answer passed back in the op). nil when it was not a known, unmoved page.
local function take_moved(e)
  if e.moved_from == '' then return nil end
  if e.inherit ~= '' then
    return {r = rec_read(e.inherit), blob = e.inherit_blob}
  end
  local raw = redis.call('HGET', K.pages, e.moved_from)
  if not raw then return nil end
  local r = rec_read(raw)
  if r.state == MOVED then return nil end
  local taken = {r = rec_read(raw), blob = page_get(K.records, e.moved_from) or ''}
  retire(r, e.moved_from, e.moved_host)
  return taken
end

-- Y url host: give up a moved page's history to another shard -> packed record, latest record
-- ('' when not a known, unmoved page).
local function give_up(url, host)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  if r.state == MOVED then return '' end
  local blob = page_get(K.records, url) or ''
  retire(r, url, host)
  return raw, blob
end

-- G url host time billed + event arguments: a known page answered 404 or 410.
-- -> suspect|removed|gone|'' (not known, or moved), '', '', event kind, entry id, entry JSON
local function gone(url, host, time, billed, e)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  if r.state == MOVED then return '' end
  r.fetches = r.fetches + 1
  if billed then
    r.billed = r.billed + billed
    r.billed_n = r.billed_n + 1
  end
  if time > r.last_tried then r.last_tried = time end
  local verdict, due = 'gone', now + PROBE
  if r.state == ALIVE then
    r.state, verdict, due = SUSPECT, 'suspect', now + CONFIRM
  elseif r.state == SUSPECT then
    r.state, verdict = REMOVED, 'removed'
  end
  if r.due == -1 then r.due = 0 end
  reschedule(r, url, host, due)
  save(r, url)
  if verdict ~= 'removed' or r.type == 0 then
    log_check(e, url, time, 'gone', billed, '')
    return verdict
  end
  local previous = page_get(K.records, url) or ''
  local id, entry = emit('removed', e, e.url, url, time, r.last_fetched, previous, '', '')
  log_check(e, url, time, 'removed', billed, id)
  return verdict, '', '', 'removed', id, entry
end

-- Where a page not answering as it should is due next (nil: no change to its schedule).
local function lifecycle_due(r, default)
  if r.state == MOVED then return nil end
  if r.state == REMOVED then return now + PROBE end
  if r.state == SUSPECT then return now + CONFIRM end
  return default
end
