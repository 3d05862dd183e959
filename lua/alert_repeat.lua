-- alert_repeat: count a repeat crossing once per receiver, and give its
-- reply in the thread of the alert that holds the cooldown to one
-- claimant, once.
--
-- KEYS[1]  the repeat's record for the receiver (alert_claim wrote it
--          suppressed): repeat = counted | pending | replied, and
--          repeat_claimant
-- ARGV[1]  the claimant, 1 to 512 bytes (as alert_claim's)
-- ARGV[2]  count (count it, reply nowhere) | reply (count it and claim its
--          reply) | replied (its reply was posted)
--
-- Reply:
--   1  counted now; with reply, the reply is the claimant's: post it
--   4  reply: pending under this claimant already (an attempt that
--      crashed): post it, not counted again
--   5  reply: pending under another claimant: nothing to do
--   2  seen before (counted, or replied): nothing to do
--   0  no suppressed record (or, for replied, no reply pending under the
--      claimant): nothing written
--  -1  an argument is unusable; nothing written
-- The record keeps its lifetime. A record of another type is none.
local claimant, op = ARGV[1], ARGV[2]
if not (#KEYS == 1 and type(claimant) == 'string' and #claimant >= 1 and #claimant <= 512
    and (op == 'count' or op == 'reply' or op == 'replied')) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'state') ~= 'suppressed' then
  return 0
end
local seen = redis.call('HGET', KEYS[1], 'repeat')
local holder = redis.call('HGET', KEYS[1], 'repeat_claimant')
if op == 'replied' then
  if seen ~= 'pending' or holder ~= claimant then
    return 0
  end
  redis.call('HSET', KEYS[1], 'repeat', 'replied')
  return 1
end
if seen == 'pending' and op == 'reply' then
  if holder == claimant then
    return 4
  end
  return 5
end
if seen then
  return 2
end
if op == 'count' then
  redis.call('HSET', KEYS[1], 'repeat', 'counted')
else
  redis.call('HSET', KEYS[1], 'repeat', 'pending', 'repeat_claimant', claimant)
end
return 1
