-- alert_settle: record how a claimed alert ended.
--
-- KEYS[1]  the (rule, group) cooldown
-- KEYS[2]  the alert's delivery record
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  outcome: sent | failed
-- ARGV[3]  how long the delivery record lives, seconds (positive)
--
-- Reply: 1 recorded, -1 an argument is unusable (nothing written).
--
-- A failed alert gives its cooldown back, but only if it still holds it
-- (compare-and-delete: the cooldown may have ended and been taken by
-- another alert since), so that the next crossing is not silenced by an
-- alert nobody saw. A cooldown of another type (written by another) is not
-- this alert's: read with redis.pcall, it does not fail the settle.
local id = ARGV[1]
if not (type(id) == 'string' and #id >= 1 and #id <= 256
    and (ARGV[2] == 'sent' or ARGV[2] == 'failed')
    and type(ARGV[3]) == 'string' and #ARGV[3] <= 10 and string.match(ARGV[3], '^[1-9]%d*$')) then
  return -1
end
if ARGV[2] == 'failed' and redis.pcall('GET', KEYS[1]) == id then
  redis.call('DEL', KEYS[1])
end
redis.call('SET', KEYS[2], ARGV[2], 'EX', ARGV[3])
return 1
