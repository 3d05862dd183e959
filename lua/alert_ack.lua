-- alert_ack: record that someone acknowledged an alert, in its record for
-- the receiver where they did (a click on Slack's Acknowledge).
--
-- KEYS[1]  the alert's record for the receiver (alert_claim)
-- ARGV[1]  who, 1 to 256 bytes
--
-- Reply:
--   {1, who, at}  recorded now: acked_by and acked_at (milliseconds since
--                 1970, by Redis's clock) are set
--   {2, who, at}  acknowledged before, by who at at: the first stays
--   {0}           no record: the alert was never claimed for this receiver,
--                 or its record ended (it lives as long as delivery records)
--   -1            an argument is unusable; nothing written
--
-- The record keeps its life: an acknowledgement never makes it outlive
-- the crossing it answers. A record of another type (written by another)
-- is none.
local who = ARGV[1]
if not (#KEYS == 1 and type(who) == 'string' and #who >= 1 and #who <= 256) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0}
end
local by = redis.call('HGET', KEYS[1], 'acked_by')
if by then
  return {2, by, redis.call('HGET', KEYS[1], 'acked_at') or ''}
end
local t = redis.call('TIME')
local at = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
redis.call('HSET', KEYS[1], 'acked_by', who, 'acked_at', at)
return {1, who, at}
