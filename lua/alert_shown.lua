-- alert_shown: record the version of an alert's life (alert_life) that a
-- receiver shows now, after it showed it (an Updater's Update).
--
-- KEYS[1]  the alert's record for the receiver (alert_claim): its shown
-- ARGV[1]  the version shown, a positive integer of at most 15 digits
--
-- Reply: 1 recorded; 0 the record shows that version or a later one
-- already, or there is no record (nothing is written: a record is never
-- made here, nor made to outlive its alert); -1 an argument is unusable.
-- A record of another type is none.
local v = ARGV[1]
if not (#KEYS == 1 and type(v) == 'string' and #v <= 15 and string.match(v, '^[1-9]%d*$')) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return 0
end
local shown = tonumber(redis.call('HGET', KEYS[1], 'shown')) or 0
if shown >= tonumber(v) then
  return 0
end
redis.call('HSET', KEYS[1], 'shown', v)
return 1
