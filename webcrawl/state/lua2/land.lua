-- The land script, part 4 of 4: the operations, and the loop that runs them. Each op is a code
-- and its arguments; page ops take the page's URL and host first, host ops the host. Returns
-- REPLY_WIDTH values per op (unused ones ''). Event arguments (EV, 15 values, in this order):
-- record, URL as fetched, status, site, page type, volatile fields, body pointer, body hash (8
-- bytes), moved-from URL, moved-from URL as fetched, moved-from host, inherited record,
-- inherited latest record (from a Y op on another shard), the typed pages a listing page or
-- hub shows (one a line, '' for other pages) and the fetch's bytes on the wire; see
-- lifecycle.lua and checks.lua. Ops O, G and C log the fetch as a check (checks.lua).
--   O url host kind(f|n) time hash set_validators etag last_modified type tier pkind(p|s|h)
--     change_age billed EV
--       -> verdict (new|changed|unchanged|none), interval, sitemap trust news, event kind, event
--          entry id, the entry's fields as JSON (lifecycle.lua); 'body' alone, having written
--          nothing, when the body pointer is '?' (not stored yet) and the observation would
--          make an event: the caller stores the body and lands the observation again
--   G url host time billed EV -> suspect|removed|gone|'', '', '', event kind, entry id, entry JSON
--   Y url host             -> packed record, latest record of a moved page, now retired ('' if none)
--   C url host time outcome billed EV -> a fetch of the page that lands no observation (outcome
--                            error: an error answer, a timeout; redirected: a 3xx): logged as a
--                            check, nothing else
--   T url host             -> '1' when the page is now due at once (a known change it follows)
--   I url host iv due_at follow -> '1' when rescheduled (allocator: interval, optional due time,
--                            whether known changes make the page due at once)
--   L url host hash listed_at      -> first|changed|unchanged|seen (listing summary)
--   M url host lastmod read_at mode -> '1' when the date made the page due (trusted and newer)
--   A host ok retry_after base max half_life time -> streak, previous streak, hold seconds
--   R url host attempted   -> '1' when a popped revisit that landed no observation is scheduled again:
--                            due at its time (at once if past) if never tried, else an interval
--                            from now, and a later interval counts from now too (an answer that
--                            lands nothing must not recur every turn)
--   F host at              -> next-allowed time pushed to at + delay (a fetch finished at server time at; now if later)
--   D host seconds         -> the host's delay set (a Crawl-delay)
--   V host event time earn_after ignore_limit lie_limit retry_seconds -> new state or ''

local function add_interval(r, interval)
  local t = math.max(interval, BIN_BASE)
  local b = math.floor(BINS_PER_DOUBLING * math.log(t / BIN_BASE) / math.log(2))
  b = math.min(math.max(b, 0), NBINS - 1)
  local free, nearest, best = nil, nil, nil
  for i = 0, REC_SLOTS - 1 do
    local bi = r['b' .. i]
    if bi == b then free = i break end
    if bi == REC_EMPTY_BIN then
      free = free or i
    elseif not best or math.abs(bi - b) < best then
      nearest, best = i, math.abs(bi - b)
    end
  end
  local slot = free or nearest
  if r['b' .. slot] == REC_EMPTY_BIN then r['b' .. slot] = b end
  r['n' .. slot] = r['n' .. slot] + 1
  r['s' .. slot] = r['s' .. slot] + interval
end

local function tracker(key, host)
  local raw = redis.call('HGET', key, host)
  if raw then return cjson.decode(raw) end
  return {comparisons = 0, disagreement_rate = 0}
end

-- A host's sitemap dates are trusted once enough comparisons agree, and only if they have been
-- right both ways: a date that always says "changed" (stamped with the time of the request) or
-- never does is right by chance on pages that change at every visit, or never, and says nothing.
local function trusted(t)
  return t.comparisons >= TS_MIN and t.disagreement_rate <= TS_MAX and (t.quiet or 0) >= 1
    and (t.loud or 0) >= 1
end

local function judge_sitemap(host, says_changed, changed)
  local t = tracker(K.trust_sitemaps, host)
  local agrees = says_changed == changed
  local before = trusted(t)
  t.comparisons = t.comparisons + 1
  local w = math.max(1 / TS_MEMORY, 1 / t.comparisons)
  t.disagreement_rate = t.disagreement_rate + w * ((agrees and 0 or 1) - t.disagreement_rate)
  if agrees and changed then t.loud = (t.loud or 0) + 1 end
  if agrees and not changed then t.quiet = (t.quiet or 0) + 1 end
  if not agrees and t.disagreement_rate > TS_MAX then
    t.comparisons, t.loud, t.quiet = 0, 0, 0
  end
  redis.call('HSET', K.trust_sitemaps, host, cjson.encode(t))
  local after = trusted(t)
  if after ~= before then return after and 'trusted' or 'distrusted' end
  return ''
end

local function sitemap_trusted(host, mode)
  if mode == 'always' then return true end
  if mode == 'never' then return false end
  return trusted(tracker(K.trust_sitemaps, host))
end

local function observe(url, host, kind, time, hash, set_v, etag, lm, ptype, tier, pkind, age, billed, e)
  local raw = redis.call('HGET', K.pages, url)
  local r = rec_read(raw)
  local known = raw and true or false
  if e.pointer == '?' then
    -- The body is not stored yet: an observation that makes an event waits for it (nothing is
    -- written; the caller stores the body and lands again), so no event lacks its body.
    if kind == 'f' and (e.moved_from ~= '' or not known or r.state == REMOVED or r.hash ~= hash)
        and not (known and r.state == MOVED) then
      return 'body'
    end
    e.pointer = ''
  end
  local mover = take_moved(e)
  if known and r.state == MOVED and not mover then
    return 'none'  -- its history lives at the URL it moved to
  end
  local previous_at = nil
  if mover then
    previous_at = mover.r.last_fetched
    if not known or r.state == MOVED then  -- the history follows the page to its new URL
      r = mover.r
      r.due, r.state, known = 0, ALIVE, true
    end
  elseif known then
    previous_at = r.last_fetched
  end
  local was = r.state
  local news = ''
  r.fetches = r.fetches + 1
  if billed then
    r.billed = r.billed + billed
    r.billed_n = r.billed_n + 1
  end
  if ptype > 0 then r.type = ptype end
  if tier >= 0 then r.tier = tier end
  local before = member_kind(r)
  if pkind == 's' then r.kind = KIND_SITEMAP elseif pkind == 'h' then r.kind = KIND_HUB end
  if member_kind(r) ~= before and r.due > 0 then  -- its due member changes class: drop the old one
    due_remove(K.due, host, r.due, before, url)
    r.due = 0
  end
  local verdict, interval = 'none', nil
  if kind == 'n' then r.not_modified = r.not_modified + 1 end
  if not known then
    if kind == 'f' then
      verdict = 'new'
      r.first_seen, r.last_fetched, r.last_change = time, time, time
    end
  else
    local previous = r.last_fetched
    interval = math.max(time - previous, 0)
    if time > previous then r.last_fetched = time end
    local changed = kind == 'f' and r.hash ~= hash
    r.visits = r.visits + 1
    r.seconds = r.seconds + interval
    if changed then
      verdict = 'changed'
      r.changes = r.changes + 1
      r.last_change = time
      if age and age >= 0 and age <= interval then
        r.exact_changes = r.exact_changes + 1
        r.exact_seconds = r.exact_seconds + age
      else
        add_interval(r, interval)
      end
    else
      verdict = 'unchanged'
      r.unchanged_seconds = r.unchanged_seconds + interval
    end
    r.last_interval = interval
    r.last_changed = changed and 1 or 0
    -- Sitemap date read after our previous fetch: did it tell the truth? Judged only where the
    -- time since the read is short beside the time before it, so a change the date could not
    -- know of (made after the read) is unlikely.
    if kind == 'f' and r.lastmod > 0 and r.lastmod_read > previous and
        (time - r.lastmod_read) <= 0.25 * (r.lastmod_read - previous) then
      local says_changed = r.lastmod > previous
      news = judge_sitemap(host, says_changed, changed)
    end
  end
  if kind == 'f' then r.hash = hash end
  if e.body8 ~= '' then r.body8 = e.body8 end
  if set_v == '1' then
    if etag ~= '' or lm ~= '' then
      redis.call('HSET', K.validators, page_key(url), etag .. '\t' .. lm)
    else
      page_del(K.validators, url)
    end
  end
  -- The event, if this observation makes one (a 304 only restores: it shows the page is there).
  local event, id, entry, previous = '', '', '', ''
  if mover and kind == 'f' then event = 'moved'
  elseif was == REMOVED then event = 'restored'
  elseif kind == 'f' and (verdict == 'new' or verdict == 'changed') then event = verdict end
  r.state = ALIVE
  if event ~= '' and r.type > 0 then
    if event ~= 'new' then
      previous = mover and mover.blob or page_get(K.records, url) or ''
    end
    local record = kind == 'f' and e.record or previous
    if mover then
      id, entry = emit(event, e, e.moved_url, e.moved_from, time, previous_at, previous, record,
                       e.url)
    else
      id, entry = emit(event, e, e.url, url, time, event ~= 'new' and previous_at or nil,
                       previous, record, '')
    end
  else
    event = ''
  end
  if kind == 'f' and e.record ~= '' then redis.call('HSET', K.records, page_key(url), e.record) end
  if verdict ~= 'none' then
    local outcome = event ~= '' and event or (kind == 'n' and 'not_modified' or verdict)
    log_check(e, url, time, outcome, billed, id)
  end
  if kind == 'f' and e.links ~= '' then redis.call('HSET', K.links, url, e.links) end
  if verdict ~= 'none' or known then
    local due = nil
    if r.iv > 0 then due = math.max(r.last_fetched + r.iv, NOT_BEFORE) end
    if r.due == -1 then r.due = 0 end
    reschedule(r, url, host, due)
    save(r, url)
  end
  return verdict, interval and num(interval) or '', news, event, id, entry
end

local function trigger(url, host, at)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  if r.state == MOVED or r.state == SUSPECT then return '' end
  -- A removed page shown again (a listing, a sitemap date) is probed at once, followed or not.
  if (r.follow ~= 1 and r.state ~= REMOVED) or r.due == -1 or (r.due > 0 and r.due <= at) then
    return ''
  end
  reschedule(r, url, host, at)
  redis.call('HSET', K.pages, url, rec_write(r))
  return '1'
end

local function interval(url, host, iv, due_at, follow)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  r.iv = iv
  r.follow = follow
  if r.due ~= -1 and r.state == ALIVE then  -- a page gone, removed or moved keeps its own due
    local due = due_at
    -- From the page's latest try: a fetch that landed nothing still counts as a visit here,
    -- so a new interval cannot make a page just tried due again at once.
    if not due and iv > 0 then due = math.max(r.last_fetched, r.last_tried) + iv end
    reschedule(r, url, host, due)
  end
  redis.call('HSET', K.pages, url, rec_write(r))
  return '1'
end

-- The listing hash keeps per item: its summary's hash, since when the listings have shown that
-- summary (its first listing, or the listing that saw it change), and when it was last listed.
local function listing(url, host, hash, listed_at)
  local old = redis.call('HGET', K.listing, url)
  local changed_at, status = num(listed_at), 'first'
  local previous_listed = 0
  if old then
    local h, t, l = string.match(old, '^(%S+) (%S+) (%S+)')
    previous_listed = tonumber(l) or 0
    if h == hash then changed_at, status = t, 'unchanged' else changed_at, status = num(listed_at), 'changed' end
  end
  redis.call('HSET', K.listing, url, hash .. ' ' .. changed_at .. ' ' .. num(listed_at))
  if redis.call('HEXISTS', K.pages, url) == 1 then
    redis.call('SADD', K.dirty, url)  -- the allocator reads what listings say of the page
  end
  local raw = redis.call('HGET', K.pages, url)
  local r = raw and rec_read(raw)
  if r and r.state == REMOVED and (status ~= 'unchanged' or previous_listed < r.last_tried) then
    trigger(url, host, now)  -- listed again after its removal: probe it now
  elseif status == 'changed' then
    if r and r.last_fetched >= previous_listed and r.last_changed == 1 then
      status = 'seen'  -- fetched since the previous listing, and the change was seen then
    elseif r then
      trigger(url, host, now)
    end
  end
  return status
end

local function lastmod(url, host, date, read_at, mode)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  r.lastmod, r.lastmod_read = date, read_at
  redis.call('HSET', K.pages, url, rec_write(r))
  redis.call('SADD', K.dirty, url)  -- the allocator reads what the date says of the copy
  if date > r.last_fetched and sitemap_trusted(host, mode) then return trigger(url, host, now) end
  return ''
end

local function attempt(host, ok, retry_after, base, max, half, time)
  local raw = redis.call('HGET', K.health, host)
  local bad, weight, at, streak, hold_until = 0, 0, 0, 0, 0
  if raw then bad, weight, at, streak, hold_until = struct.unpack('<dddI4d', raw) end
  local previous = streak
  if at > 0 and time > at then
    local factor = 2 ^ (-(time - at) / half)
    bad, weight = bad * factor, weight * factor
  end
  if time > at then at = time end
  weight = weight + 1
  local hold = 0
  if ok == '1' then
    streak = 0
  else
    bad, streak = bad + 1, streak + 1
    hold = retry_after or base * 2 ^ (streak - 1)
    hold = math.min(math.max(hold, 0), max)
    hold_until = math.max(hold_until, now + hold)
    local nxt = tonumber(redis.call('HGET', K.next, host) or 0)
    if now + hold > nxt then
      redis.call('HSET', K.next, host, num(now + hold))
      rescored[host] = true
    end
  end
  redis.call('HSET', K.health, host, struct.pack('<dddI4d', bad, weight, at, streak, hold_until))
  return streak, previous, num(hold)
end

local function finished(host, at)
  -- From when the fetch finished (the batch may come a flush later), never from the future.
  local left = tonumber(at)
  if not left or left > now then left = now end
  local wanted = left + delay_of(K, host, default_delay)
  local nxt = tonumber(redis.call('HGET', K.next, host) or 0)
  if wanted > nxt then
    redis.call('HSET', K.next, host, num(wanted))
    rescored[host] = true
  end
end

local function validator_trust(host, event, time, earn_after, ignore_limit, lie_limit, retry)
  local raw = redis.call('HGET', K.trust_validators, host)
  local t = raw and cjson.decode(raw) or {state = 'learning', confirmed = 0, ignored_run = 0,
                                         lies = 0, not_modified = 0, since = 0, reason = ''}
  local before = t.state
  if t.state == 'distrusted' then
    if time < t.since + retry then return '' end
    t.state, t.confirmed, t.ignored_run, t.lies, t.since = 'learning', 0, 0, 0, time
  end
  local function distrust(reason)
    t.state, t.since, t.reason = 'distrusted', time, reason
    t.confirmed, t.ignored_run, t.lies = 0, 0, 0
  end
  if event == 'lied' then
    t.lies = t.lies + 1
    if t.lies >= lie_limit then distrust('answers 304 while the record changed') end
  elseif event == 'ignored' then
    t.ignored_run = t.ignored_run + 1
    if t.ignored_run >= ignore_limit then
      distrust('answers 200 to conditional requests for unchanged records')
    end
  else
    t.ignored_run = 0
    t.not_modified = t.not_modified + 1
    if event == 'confirmed' then
      t.confirmed = t.confirmed + 1
      if t.state == 'learning' and t.confirmed >= earn_after then t.state, t.since = 'trusted', time end
    end
  end
  redis.call('HSET', K.trust_validators, host, cjson.encode(t))
  if t.state ~= before then return t.state end
  return ''
end

local function release(url, host, attempted)
  local raw = redis.call('HGET', K.pages, url)
  if not raw then return '' end
  local r = rec_read(raw)
  if r.due ~= -1 then return '' end
  r.due = 0
  local due = now
  if attempted then
    r.last_tried = now
    due = nil  -- no interval yet: left to the allocator
    if r.iv > 0 then due = math.max(now + r.iv, NOT_BEFORE) end
  elseif r.iv > 0 then
    due = math.max(now, r.last_fetched + r.iv)
  end
  if r.state ~= ALIVE then due = lifecycle_due(r, due) end
  reschedule(r, url, host, due)
  redis.call('HSET', K.pages, url, rec_write(r))
  return '1'
end

local function opt(x) if x == '' then return nil end return tonumber(x) end

-- The event arguments of an op, from ARGV[j] on (the EV list above).
local function event_args(j)
  return {record = ARGV[j], url = ARGV[j + 1], status = ARGV[j + 2], site = ARGV[j + 3],
          page_type = ARGV[j + 4], volatile = ARGV[j + 5], pointer = ARGV[j + 6],
          body8 = ARGV[j + 7], moved_from = ARGV[j + 8], moved_url = ARGV[j + 9],
          moved_host = ARGV[j + 10], inherit = ARGV[j + 11], inherit_blob = ARGV[j + 12],
          links = ARGV[j + 13], bytes = ARGV[j + 14]}
end
local EV = 15

local i = FIRST_OP
while i <= #ARGV do
  local code = ARGV[i]
  local a, b, c, d, e, f, g = '', '', '', '', '', '', ''
  if code == 'O' then
    a, b, c, d, e, f, g = observe(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]),
                                  ARGV[i + 5], ARGV[i + 6], ARGV[i + 7], ARGV[i + 8],
                                  tonumber(ARGV[i + 9]), tonumber(ARGV[i + 10]), ARGV[i + 11],
                                  opt(ARGV[i + 12]), opt(ARGV[i + 13]), event_args(i + 14))
    i = i + 14 + EV
  elseif code == 'G' then
    a, b, c, d, e, f, g = gone(ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), opt(ARGV[i + 4]),
                               event_args(i + 5))
    i = i + 5 + EV
  elseif code == 'Y' then
    a, b = give_up(ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif code == 'C' then
    log_check(event_args(i + 6), ARGV[i + 1], tonumber(ARGV[i + 3]), ARGV[i + 4],
              opt(ARGV[i + 5]), '')
    i = i + 6 + EV
  elseif code == 'T' then
    a = trigger(ARGV[i + 1], ARGV[i + 2], now)
    i = i + 3
  elseif code == 'I' then
    a = interval(ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), opt(ARGV[i + 4]),
                 tonumber(ARGV[i + 5]))
    i = i + 6
  elseif code == 'L' then
    a = listing(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]))
    i = i + 5
  elseif code == 'M' then
    a = lastmod(ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), ARGV[i + 5])
    i = i + 6
  elseif code == 'A' then
    a, b, c = attempt(ARGV[i + 1], ARGV[i + 2], opt(ARGV[i + 3]), tonumber(ARGV[i + 4]),
                      tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]))
    i = i + 8
  elseif code == 'R' then
    a = release(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3] == '1')
    i = i + 4
  elseif code == 'F' then
    finished(ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif code == 'D' then
    redis.call('HSET', K.delay, ARGV[i + 1], ARGV[i + 2])
    i = i + 3
  elseif code == 'V' then
    a = validator_trust(ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]),
                        tonumber(ARGV[i + 5]), tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]))
    i = i + 8
  else
    return redis.error_reply('land: unknown op ' .. tostring(code) .. ' at argument ' .. i)
  end
  local o = #out
  out[o + 1], out[o + 2], out[o + 3], out[o + 4] = a or '', b or '', c or '', d or ''
  out[o + 5], out[o + 6], out[o + 7], out[o + 8] = e or '', f or '', g or '', ''
end
for host in pairs(rescored) do rescore(K, host) end
return op_store(KEYS[18], tonumber(ARGV[1]), out)
