-- alert_settle: record how a claimed alert ended for one receiver, or hand
-- its claim over to the parked alerts.
--
-- KEYS[1]  the (rule, group) cooldown
-- KEYS[2]  the alert's record for the receiver (alert_claim)
-- KEYS[3]  the alert's hash (alert_claim): its taken count
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  outcome: sent | failed | parked
-- ARGV[3]  how long the record lives, seconds (positive)
-- ARGV[4]  the claimant whose claim this settles, 1 to 512 bytes
-- ARGV[5]  sent: the receiver's receipt (where the message is, for a later
--          update or reply: opaque here), 0 to 512 bytes, "" for none;
--          otherwise ""
--
-- Reply: 1 recorded; 0 (parked only) the record is not pending under
-- ARGV[4] (settled, or claimed by another since): nothing written; -1 an
-- argument is unusable, nothing written.
--
-- sent and failed are recorded whoever claimed last: a post that happened
-- must answer every later copy. A failed alert, pending for this receiver,
-- leaves the alert's taken count (the receivers that took its send and did
-- not fail); it gives its cooldown back only when that count is then 0 (no
-- receiver sent it, none holds a send of it) and it still holds the
-- cooldown (compare-and-delete: the cooldown may have ended and been taken
-- by another alert since), so that the next crossing is not silenced by an
-- alert nobody saw, while one that some receiver shows keeps it. parked hands a pending claim to
-- the claimant "parked" (the parked alerts' retries, which a lease makes
-- one at a time): the message that parked it is then acknowledged, and a
-- copy of it delivered again is claimed elsewhere.
--
-- A cooldown of another type (written by another) is not this alert's:
-- read with redis.pcall, it does not fail the settle. A record of another
-- type goes; an alert's hash of another type counts no receiver.
local id, outcome, claimant, receipt = ARGV[1], ARGV[2], ARGV[4], ARGV[5]
if not (#KEYS == 3 and type(id) == 'string' and #id >= 1 and #id <= 256
    and (outcome == 'sent' or outcome == 'failed' or outcome == 'parked')
    and type(ARGV[3]) == 'string' and #ARGV[3] <= 10 and string.match(ARGV[3], '^[1-9]%d*$')
    and type(claimant) == 'string' and #claimant >= 1 and #claimant <= 512
    and type(receipt) == 'string' and #receipt <= 512 and (outcome == 'sent' or receipt == '')) then
  return -1
end
local kind = redis.call('TYPE', KEYS[2])['ok']
if kind ~= 'hash' and kind ~= 'none' then
  redis.call('DEL', KEYS[2])
end
if outcome == 'parked' then
  if redis.call('HGET', KEYS[2], 'state') ~= 'pending'
      or redis.call('HGET', KEYS[2], 'claimant') ~= claimant then
    return 0
  end
  redis.call('HSET', KEYS[2], 'claimant', 'parked')
  redis.call('EXPIRE', KEYS[2], ARGV[3])
  return 1
end
if outcome == 'failed' then
  local taken = 0
  if redis.call('TYPE', KEYS[3])['ok'] == 'hash' then
    taken = math.max(0, math.floor(tonumber(redis.call('HGET', KEYS[3], 'taken')) or 0))
    if taken > 0 and redis.call('HGET', KEYS[2], 'state') == 'pending' then
      taken = taken - 1
      redis.call('HSET', KEYS[3], 'taken', tostring(taken))
    end
  end
  if taken == 0 and redis.pcall('GET', KEYS[1]) == id then
    redis.call('DEL', KEYS[1])
  end
end
redis.call('HSET', KEYS[2], 'state', outcome)
if receipt ~= '' then
  redis.call('HSET', KEYS[2], 'receipt', receipt)
end
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
