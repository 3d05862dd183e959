-- The seed-style script: a fixed-window counter the simplest way, as the
-- design documents describe one: count, start the window when the key is
-- new, say whether this call crossed. No idempotency, no records: the
-- cheapest script a velocity rule can run, and so the yardstick the bench's
-- ceilings and the side-by-side measurement compare fraudwatch's scripts with.
--
-- KEYS[1]  the window's counter
-- ARGV[1]  increment; ARGV[2] the window's length, seconds; ARGV[3] threshold
-- Reply: {current, 1} when this call crossed the threshold, else {current, 0}
local prev = tonumber(redis.call('GET', KEYS[1]) or '0')
local current = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) == -1 then
  redis.call('EXPIRE', KEYS[1], ARGV[2])
end
local threshold = tonumber(ARGV[3])
if prev < threshold and current >= threshold then
  return {current, 1}
end
return {current, 0}
