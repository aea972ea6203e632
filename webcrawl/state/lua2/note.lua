-- Note URLs the crawl refused (the SSRF guard, robots.txt) so they come back when met again.
-- KEYS: refused, refused:at
-- ARGV: limit, time, then fingerprint, value pairs. Returns the number noted.
local limit, at, noted = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
for i = 3, #ARGV, 2 do
  note_refused(KEYS[1], KEYS[2], ARGV[i], ARGV[i + 1], at, limit)
  noted = noted + 1
end
return noted
