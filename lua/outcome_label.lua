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
--
-- Reply: {code, n, n order ids, change}, where code is 1 labelled now, 2
-- it had this label already (nothing written); change is empty or 5
-- elements (outcome_record.lua's changes); {0}: no record; -1 an argument
-- is unusable. The record keeps its lifetime. A record of another type is
-- none.
local id, label, by = ARGV[1], ARGV[2], ARGV[3]
if not (#KEYS == 1 and #ARGV == 3 and #id >= 1 and #id <= 512 and LABELS[label] and #by >= 1 and #by <= 256) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0}
end
local code, at = 2, now()
if redis.call('HGET', KEYS[1], 'label') ~= label then
  code = 1
  redis.call('HSET', KEYS[1], 'label', label, 'labelled_by', by, 'labelled_at', tostring(at))
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
