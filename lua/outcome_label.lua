-- outcome_label: give an alert its own label (a click, the CLI), which
-- wins over its orders' outcomes, and judge it again (docs/outcomes.md).
-- The caller then records the label as the outcome of each order the
-- alert lists (outcome_record), which this answers whether or not the
-- label changed: a retry completes what a first try did not.
--
-- KEYS[1]  the alert's record (outcome_prelude.lua)
-- ARGV[1]  the alert's id, 1 to 512 bytes
-- ARGV[2]  the label: fraud | legit | unclear
-- ARGV[3]  who, 1 to 256 bytes ("slack:U123", "cli:alice")
-- ARGV[4]  when the label was given, ms (the alert's life's labelled_at,
--          at most 15 digits); 0: now, by Redis's clock, replacing any
--          other label (the life ended: no order of clicks to keep)
--
-- Reply: {code, n, n order ids, change}, where code is 1 labelled now, 2
-- unchanged: it had this label already, or another given later (or at
-- the same time: the first stays), as labels given at once may come here
-- in another order than to the life; change is empty or 5
-- elements (outcome_record.lua's changes); {0}: no record; -1 an argument
-- is unusable. The record keeps its lifetime. A record of another type is
-- none.
local id, label, by, given = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if not (#KEYS == 1 and #ARGV == 4 and #id >= 1 and #id <= 512 and LABELS[label] and #by >= 1 and #by <= 256
    and (given == '0' or string.match(given, DIGITS)) and #given <= 15) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0}
end
local code, at = 2, now()
local had = redis.call('HMGET', KEYS[1], 'label', 'labelled_at')
local when = given == '0' and at or tonumber(given)
if had[1] ~= label and (given == '0' or not LABELS[had[1]] or when > (tonumber(had[2]) or 0)) then
  code = 1
  redis.call('HSET', KEYS[1], 'label', label, 'labelled_by', by, 'labelled_at', tostring(when))
end
local out = {code, 0}
for _, name in ipairs(redis.call('HKEYS', KEYS[1])) do
  if string.sub(name, 1, 2) == 'o:' then
    out[#out + 1] = string.sub(name, 3)
    out[2] = out[2] + 1
  end
end
if code == 1 then
  settle(KEYS[1], id, out, at)
end
return out
