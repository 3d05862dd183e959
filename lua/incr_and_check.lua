-- incr_and_check: count one event into a fixed window and tell whether this
-- event is the one that crossed the threshold first.
--
-- KEYS[1]  the window counter
-- ARGV[1]  increment, a positive integer
-- ARGV[2]  window length in seconds, a positive integer
-- ARGV[3]  threshold, a positive integer
--
-- Reply: {current, 1} when prev < threshold <= current (this event crossed
-- first), {current, 0} otherwise, {-1, -1} when an argument is unusable; in
-- that case nothing has been written.
--
-- Arguments must be digit strings without leading zeros (Redis refuses
-- "007" as an integer) and are passed on to Redis as the strings they
-- arrived as: a Lua number handed to redis.call is formatted by Redis, and
-- large values (1e15) come out in exponent form, which INCRBY and EXPIRE
-- refuse. At most 18 digits keeps every value inside int64.
local function positive(s)
  return type(s) == 'string' and #s <= 18 and string.match(s, '^[1-9]%d*$') ~= nil
end

if not (positive(ARGV[1]) and positive(ARGV[2]) and positive(ARGV[3])) then
  return {-1, -1}
end
local threshold = tonumber(ARGV[3])

-- GET and INCRBY run back to back inside the script, so prev is exactly the
-- value this event found; no other client can run in between.
local prev = tonumber(redis.call('GET', KEYS[1])) or 0
local current = redis.call('INCRBY', KEYS[1], ARGV[1])

-- -1 means the key has no expiry: it was just created by INCRBY, or something
-- removed its TTL. Any other value is a running window, which must keep its
-- end: re-arming it on every event would let a steady trickle extend the
-- window forever.
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end

if prev < threshold and current >= threshold then
  return {current, 1}
end
return {current, 0}
