-- Add a batch of figures to one cycle's ledger (crawl-wide slot), once: a retry with the same op
-- id adds nothing.
-- KEYS: cycle hash, op
-- ARGV: op ttl, then field, amount, field, amount, ...
if string.sub(KEYS[2], -2) ~= ':-' then
  if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
  redis.call('SET', KEYS[2], '1', 'EX', tonumber(ARGV[1]))
end
for j = 2, #ARGV, 2 do
  redis.call('HINCRBYFLOAT', KEYS[1], ARGV[j], ARGV[j + 1])
end
return 1
