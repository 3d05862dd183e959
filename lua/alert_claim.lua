-- alert_claim: decide, once per alert and receiver, whether the dispatcher
-- may send it, and give that send to one claimant.
--
-- KEYS[1]  the (rule, group) cooldown: holds the id of the alert that took it
-- KEYS[2]  this alert's record for one receiver (Keys.Record), a hash:
--            state     pending | sent | suppressed | silenced | failed
--            claimant  who claimed it last (ARGV[4])
--          and, written by others, receipt (alert_settle) and acked_by,
--          acked_at (alert_ack)
-- KEYS[3]  the alert's record as versions before records per receiver
--          wrote it: a string, the state alone. Read, never written.
-- KEYS[4]  optional: the (rule, group)'s silences, a hash of silence id ->
--          its end, milliseconds since 1970
-- KEYS[5]  with KEYS[4]: the rule's silences, the same way
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  cooldown, seconds (0: no cooldown)
-- ARGV[3]  how long the record lives, seconds (positive)
-- ARGV[4]  the claimant, 1 to 512 bytes: the place of the message that
--          carries the alert (topic/partition/offset), or "parked"
--
-- Reply:
--   1   send it: the cooldown is this alert's (taken now, or by an earlier
--       attempt at this same alert, which may have crashed before sending);
--       its record reads pending, held by ARGV[4], until alert_settle
--       records the outcome
--   5   claimed elsewhere: the record is pending, held by another claimant
--       (a copy of the alert on another partition, or the parked alerts);
--       that claimant's own message stays uncommitted until it settles, so
--       this copy may be acknowledged without posting
--   0   suppressed: another alert holds the cooldown
--   4   silenced: a silence of the rule or of its group runs now
--   2   already sent: acknowledge it, do not post again
--   3   given up before (a permanent failure): acknowledge it
--  -1   an argument is unusable; nothing written
--
-- Redeliveries of one alert (the alerts topic is at least once) all get the
-- same decision, so a crossing is posted once and a suppressed one stays
-- suppressed even after the cooldown that suppressed it has ended. A
-- pending record held by the same claimant is a claim that crashed before
-- it settled: the same message, delivered again to its partition's next
-- owner, sends it again.
--
-- A key of another type (written by another) never fails the claim, which
-- would fail the alert's delivery on every retry: a record of another type
-- is none, and goes before the record is written; a cooldown, an old
-- record or silences of another type are none (read with redis.pcall).
-- Seconds: 0 or a positive integer without leading zeros (Redis refuses
-- "05"), at most 10 digits, so that no SET ... EX can fail after another
-- write.
local function seconds(s, zero)
  return type(s) == 'string' and ((zero and s == '0')
    or (#s <= 10 and string.match(s, '^[1-9]%d*$') ~= nil))
end

local id, claimant = ARGV[1], ARGV[4]
if not (type(id) == 'string' and #id >= 1 and #id <= 256
    and seconds(ARGV[2], true) and seconds(ARGV[3], false)
    and type(claimant) == 'string' and #claimant >= 1 and #claimant <= 512
    and (#KEYS == 3 or #KEYS == 5)) then
  return -1
end

local settled = {sent = 2, failed = 3, suppressed = 0, silenced = 4}
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', KEYS[2])
end
local state = redis.call('HGET', KEYS[2], 'state')
if settled[state] then
  return settled[state]
end
-- Settled by a version before records per receiver.
local old = redis.pcall('GET', KEYS[3])
if type(old) == 'string' and settled[old] then
  return settled[old]
end
if state == 'pending' then
  local holder = redis.call('HGET', KEYS[2], 'claimant')
  if holder and holder ~= claimant then
    return 5
  end
end

local function put(s)
  redis.call('HSET', KEYS[2], 'state', s, 'claimant', claimant)
  redis.call('EXPIRE', KEYS[2], ARGV[3])
end

-- A silence that has not ended, by Redis's clock, silences the alert
-- before it can take the cooldown. A silences hash holds at most 100
-- (silence_add).
if #KEYS == 5 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for k = 4, 5 do
    local ends = redis.pcall('HVALS', KEYS[k])
    for i = 1, #ends do -- an error's table has no elements
      if (tonumber(ends[i]) or 0) > now then
        put('silenced')
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
    put('suppressed')
    return 0
  end
end
put('pending')
return 1
