-- alert_claim: decide, once per alert, whether it is sent, and give each
-- receiver's send of it to one claimant.
--
-- KEYS[1]  the (rule, group) cooldown: holds the id of the alert that took it
-- KEYS[2]  this alert's record for one receiver (Keys.Record), a hash:
--            state     pending | sent | suppressed | silenced | failed
--            claimant  who claimed it last (ARGV[4])
--          and, written by others, receipt (alert_settle), shown
--          (alert_shown) and acked_by, acked_at (alert_ack, before lives)
-- KEYS[3]  the alert's record as versions before records per receiver
--          wrote it: a string, the state alone. Read, never written.
-- KEYS[4]  the alert's hash (Keys.Alert), one for all its receivers:
--            decision  send | suppressed | silenced: the first claim's
--            taken     receivers that took the send and did not fail
--          and, with the send decision, its life: status (open), opened_at
--          (milliseconds since 1970), alert (ARGV[5]), written here and
--          changed by alert_life
-- KEYS[5]  optional: the (rule, group)'s silences, a hash of silence id ->
--          its end, milliseconds since 1970
-- KEYS[6]  with KEYS[5]: the rule's silences, the same way
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  cooldown, seconds (0: no cooldown)
-- ARGV[3]  how long records and the alert's hash live, seconds (positive)
-- ARGV[4]  the claimant, 1 to 512 bytes: the place of the message that
--          carries the alert (topic/partition/offset), or "parked"
-- ARGV[5]  the alert as the dispatcher trusts it (JSON), 0 to 1 MiB; ""
--          keeps no life (a backtest's replay)
--
-- Reply:
--   1   send it: its record reads pending, held by ARGV[4], until
--       alert_settle records the outcome
--   5   claimed elsewhere: the record is pending, held by another claimant
--       (a copy of the alert on another partition, or the parked alerts);
--       that claimant's own message stays uncommitted until it settles, so
--       this copy may be acknowledged without posting
--   0   suppressed: another alert holds the cooldown
--   4   silenced: a silence of the rule or of its group runs
--   2   already sent: acknowledge it, do not post again
--   3   given up before (a permanent failure): acknowledge it
--  -1   an argument is unusable; nothing written
--
-- The decision is the alert's, made by its first claim, whichever receiver
-- makes it: a silence that runs, else the cooldown (taken, SET ... EX, when
-- free or already this alert's, else held by another). Every later claim,
-- of any receiver, follows it, whatever the cooldown says by then (the
-- receivers' consumer groups lag each other): a receiver that comes to an
-- alert after its cooldown ended, or after a later alert took it, sends it
-- as the first did. Only a silence is read again, and only for a receiver
-- whose own claim is pending (its alert waits for its budget, is parked, or
-- crashed mid-send): a silence begun meanwhile silences what it has not
-- sent yet. Redeliveries get the receiver's own settled answer.
--
-- A key of another type (written by another) never fails the claim, which
-- would fail the alert's delivery on every retry: a record or an alert's
-- hash of another type is none, and goes before it is written; a
-- cooldown, an old record or silences of another type are none (read with
-- redis.pcall). Seconds: 0 or a positive integer without leading zeros
-- (Redis refuses "05"), at most 10 digits, so that no SET ... EX can fail
-- after another write.
local function seconds(s, zero)
  return type(s) == 'string' and ((zero and s == '0')
    or (#s <= 10 and string.match(s, '^[1-9]%d*$') ~= nil))
end

local id, life, claimant, body = ARGV[1], ARGV[3], ARGV[4], ARGV[5]
if not (type(id) == 'string' and #id >= 1 and #id <= 256
    and seconds(ARGV[2], true) and seconds(life, false)
    and type(claimant) == 'string' and #claimant >= 1 and #claimant <= 512
    and type(body) == 'string' and #body <= 1048576
    and (#KEYS == 4 or #KEYS == 6)) then
  return -1
end

local settled = {sent = 2, failed = 3, suppressed = 0, silenced = 4}
for _, k in ipairs({KEYS[2], KEYS[4]}) do
  local kind = redis.call('TYPE', k)['ok']
  if kind ~= 'hash' and kind ~= 'none' then
    redis.call('DEL', k)
  end
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
  redis.call('EXPIRE', KEYS[2], life)
end

local decision = redis.call('HGET', KEYS[4], 'decision')
if decision ~= 'send' and decision ~= 'suppressed' and decision ~= 'silenced' then
  decision = nil -- none, or not one of ours: decided again
end
local function decide(d)
  if not decision then
    redis.call('HSET', KEYS[4], 'decision', d)
    redis.call('EXPIRE', KEYS[4], life)
  end
end

-- A silence that has not ended, by Redis's clock. A silences hash holds
-- at most 100 (silence_add).
if #KEYS == 6 and (not decision or state == 'pending') then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  for k = 5, 6 do
    local ends = redis.pcall('HVALS', KEYS[k])
    for i = 1, #ends do -- an error's table has no elements
      if (tonumber(ends[i]) or 0) > now then
        decide('silenced')
        put('silenced')
        return 4
      end
    end
  end
end

if decision == 'suppressed' then
  put('suppressed')
  return 0
elseif decision == 'silenced' then
  put('silenced')
  return 4
elseif not decision and ARGV[2] ~= '0' then
  local holder = redis.pcall('GET', KEYS[1])
  if not holder or type(holder) == 'table' then
    redis.call('SET', KEYS[1], id, 'EX', ARGV[2])
  elseif holder ~= id then
    decide('suppressed')
    put('suppressed')
    return 0
  end
end
if not decision and body ~= '' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('HSET', KEYS[4], 'status', 'open', 'opened_at', tostring(now), 'alert', body)
end
decide('send')
if state ~= 'pending' then
  -- Not HINCRBY: a field that is no integer must not fail the claim.
  local taken = math.max(0, math.floor(tonumber(redis.call('HGET', KEYS[4], 'taken')) or 0))
  redis.call('HSET', KEYS[4], 'taken', tostring(taken + 1))
end
put('pending')
return 1
