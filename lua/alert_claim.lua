-- alert_claim: decide, once per alert, whether the dispatcher may send it.
--
-- KEYS[1]  the (rule, group) cooldown: holds the id of the alert that took it
-- KEYS[2]  this alert's delivery record: pending | sent | suppressed |
--          silenced | failed
-- KEYS[3]  optional: the (rule, group)'s silences, a hash of silence id ->
--          its end, milliseconds since 1970
-- KEYS[4]  with KEYS[3]: the rule's silences, the same way
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  cooldown, seconds (0: no cooldown)
-- ARGV[3]  how long the delivery record lives, seconds (positive)
--
-- Reply:
--   1   send it: the cooldown is this alert's (taken now, or by an earlier
--       attempt at this same alert, which may have crashed before sending);
--       its record reads pending until alert_settle records the outcome
--   0   suppressed: another alert holds the cooldown
--   4   silenced: a silence of the rule or of its group runs now
--   2   already sent: acknowledge it, do not post again
--   3   given up before (a permanent failure): acknowledge it
--  -1   an argument is unusable; nothing written
--
-- Redeliveries of one alert (the alerts topic is at least once) all get the
-- same decision, so a crossing is posted once and a suppressed one stays
-- suppressed even after the cooldown that suppressed it has ended.
--
-- A key of another type (written by another) never fails the claim, which
-- would fail the alert's delivery on every retry: read with redis.pcall, a
-- record or cooldown of another type is none, and SET replaces it; silences
-- of another type are none.
-- Seconds: 0 or a positive integer without leading zeros (Redis refuses
-- "05"), at most 10 digits, so that no SET ... EX can fail after another
-- write.
local function seconds(s, zero)
  return type(s) == 'string' and ((zero and s == '0')
    or (#s <= 10 and string.match(s, '^[1-9]%d*$') ~= nil))
end

local id = ARGV[1]
if not (type(id) == 'string' and #id >= 1 and #id <= 256
    and seconds(ARGV[2], true) and seconds(ARGV[3], false) and (#KEYS == 2 or #KEYS == 4)) then
  return -1
end

local state = redis.pcall('GET', KEYS[2])
if state == 'sent' then
  return 2
elseif state == 'failed' then
  return 3
elseif state == 'suppressed' then
  return 0
elseif state == 'silenced' then
  return 4
end

-- A silence that has not ended, by Redis's clock, silences the alert
-- before it can take the cooldown. A silences hash holds at most 100
-- (silence_add).
if #KEYS == 4 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for k = 3, 4 do
    local ends = redis.pcall('HVALS', KEYS[k])
    for i = 1, #ends do -- an error's table has no elements
      if (tonumber(ends[i]) or 0) > now then
        redis.call('SET', KEYS[2], 'silenced', 'EX', ARGV[3])
        return 4
      end
    end
  end
end

if ARGV[2] ~= '0' then
  local holder = redis.pcall('GET', KEYS[1])
  if not holder or type(holder) == 'table' then
    redis.call('SET', KEYS[1], id, 'EX', ARGV[2])
  elseif holder ~= id then
    redis.call('SET', KEYS[2], 'suppressed', 'EX', ARGV[3])
    return 0
  end
end
redis.call('SET', KEYS[2], 'pending', 'EX', ARGV[3])
return 1
