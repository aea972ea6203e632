-- The land script, part 2 of 4: the check log. Every observation of a page (a whole answer, a
-- 304, a 404 or 410, a failed fetch) is one entry of the shard's stream `checks`, in the same
-- step as its verdict (a redirect or a failed fetch: a check of its own), for the database
-- writer (webcrawl/database/). Entry fields:
--   t fetch time, s site, p page type, u URL as fetched, c canonical URL ('' when it is u), h
--   status, o outcome
--   (new|changed|unchanged|not_modified|moved|restored|gone|removed|redirected|error), $ cost (the site's
--   billing unit), n bytes on the wire, b body pointer, e the entry id of the event it made
-- The stream keeps about CHECKS_KEPT entries (MAXLEN ~): the writer takes them long before; the
-- cap bounds what a database gone for long can make the crawl state hold. 0: no check log.

-- e: the op's event arguments (land.lua); canonical: the page's key.
local function log_check(e, canonical, time, outcome, cost, event_id)
  if CHECKS_KEPT <= 0 or e.site == '' then return end
  redis.call('XADD', K.checks, 'MAXLEN', '~', CHECKS_KEPT, '*', 't', num(time), 's', e.site,
             'p', e.page_type, 'u', e.url, 'c', canonical == e.url and '' or canonical,
             'h', e.status, 'o', outcome,
             '$', cost and num(cost) or '', 'n', e.bytes, 'b', e.pointer, 'e', event_id or '')
end
