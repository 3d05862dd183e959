-- incr_and_check: count one event into a fixed window, at most once, and
-- tell whether it is the event that crossed the threshold first.
--
-- KEYS[1]  the window counter (a string holding an integer)
-- KEYS[2]  the window's record of counted events (a hash: event -> answer)
-- KEYS[3]  this event's crossing mark (written only if it crosses)
-- ARGV[1]  increment        } positive integers
-- ARGV[2]  window, seconds  }
-- ARGV[3]  threshold        }
-- ARGV[4]  event id, 1 to 128 bytes
-- ARGV[5]  how many events one window may remember, a positive integer
-- ARGV[6]  how long a crossing mark lives, seconds, a positive integer
--
-- Reply: {current, 1} when prev < threshold <= current (this event crossed
-- first), {current, 0} otherwise, {-1, -1} when an argument is unusable; in
-- that case nothing has been written.
--
-- An event already counted in this window gets its original reply again and
-- changes nothing. Kafka redelivers after crashes and rebalances, and the
-- event that crossed must see 1 again so that its alert is handed off again
-- if the first hand-off was lost: its crossing mark outlives the window (and
-- the record's cap), because a redelivery may come after either.
--
-- Numbers must be digit strings without leading zeros (Redis refuses "007"
-- as an integer) and are passed on to Redis as the strings they arrived as:
-- a Lua number handed to redis.call is formatted by Redis, and large values
-- (1e15) come out in exponent form, which INCRBY and EXPIRE refuse. At most
-- 18 digits keeps every value inside int64; durations get 10 digits (300
-- years), so that EXPIRE can never fail after INCRBY has written.
local function positive(s, digits)
  return type(s) == 'string' and #s <= digits and string.match(s, '^[1-9]%d*$') ~= nil
end

local id = ARGV[4]
if not (positive(ARGV[1], 18) and positive(ARGV[2], 10) and positive(ARGV[3], 18)
    and positive(ARGV[5], 18) and positive(ARGV[6], 10)
    and type(id) == 'string' and #id >= 1 and #id <= 128) then
  return {-1, -1}
end

local crossed = redis.call('GET', KEYS[3])
if crossed then
  return {tonumber(crossed), 1}
end

local field = 'o:' .. id
local prior = redis.call('HGET', KEYS[2], field)
if prior then
  local first, current = string.match(prior, '^(%d):(%d+)$')
  return {tonumber(current), tonumber(first)}
end

-- GET and INCRBY run back to back inside the script, so prev is exactly the
-- value this event found; no other client can run in between.
local threshold = tonumber(ARGV[3])
local prev = tonumber(redis.call('GET', KEYS[1])) or 0
local current
if prev + tonumber(ARGV[1]) > 4611686018427387904 then
  -- Saturate at 2^62, far above any threshold (at most 2^53), instead of
  -- letting INCRBY raise an overflow error that no retry could cure.
  current = 4611686018427387904
  redis.call('SET', KEYS[1], '4611686018427387904', 'KEEPTTL')
else
  current = redis.call('INCRBY', KEYS[1], ARGV[1])
end

-- -1 means the key has no expiry: it was just created by INCRBY, or something
-- removed its TTL. Any other value is a running window, which must keep its
-- end: re-arming it on every event would let a steady trickle extend the
-- window forever.
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end

local first = 0
if prev < threshold and current >= threshold then
  first = 1
  redis.call('SET', KEYS[3], string.format('%d', current), 'EX', ARGV[6])
end

-- The record ends with the window. Past its cap an event is still counted
-- but not remembered: memory stays bounded whatever a bot sends, at the
-- price of at-least-once counting for that window's overflow.
if redis.call('HLEN', KEYS[2]) < tonumber(ARGV[5]) then
  redis.call('HSET', KEYS[2], field, string.format('%d:%d', first, current))
  redis.call('PEXPIRE', KEYS[2], redis.call('PTTL', KEYS[1]))
end
return {current, first}
