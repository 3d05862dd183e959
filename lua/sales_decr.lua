-- sales_decr: subtract a refund from a window's amount counter, at most
-- once, without touching the window's end and without going below zero.
--
-- KEYS[1]  the amount counter
-- KEYS[2]  the window's record of counted events (shared with incr_and_check)
-- ARGV[1]  refund amount, a positive integer
-- ARGV[2]  event id, 1 to 128 bytes
-- ARGV[3]  how many events one window may remember, a positive integer
--
-- Reply: {remaining, clamped}
--   {-1, -1}        an argument is unusable; nothing written
--   {0, 0}          no counter (window over, or nothing counted); nothing written
--   {remaining, 0}  counter lowered by the amount
--   {0, 1}          the refund was larger than the counter: clamped at 0
-- A refund already applied in this window gets its original reply again and
-- changes nothing.
--
-- The second element exists so the caller can count clamps; a bare
-- remaining value of 0 cannot tell a full refund from an oversized one.
local function positive(s)
  return type(s) == 'string' and #s <= 18 and string.match(s, '^[1-9]%d*$') ~= nil
end

local id = ARGV[2]
if not (positive(ARGV[1]) and positive(ARGV[3]) and type(id) == 'string' and #id >= 1 and #id <= 128) then
  return {-1, -1}
end

local field = 'r:' .. id
local prior = redis.call('HGET', KEYS[2], field)
if prior then
  local clamped, remaining = string.match(prior, '^(%d):(%d+)$')
  return {tonumber(remaining), tonumber(clamped)}
end

local current = tonumber(redis.call('GET', KEYS[1]))
if not current or current <= 0 then
  return {0, 0}
end

-- DECRBY keeps the TTL (the window keeps its end) and subtracts in int64:
-- Lua's doubles would round counters past 2^53. Past zero, the counter is
-- set back to 0 with KEEPTTL; a plain SET would drop the TTL and turn the
-- window counter into a permanent key.
local remaining = redis.call('DECRBY', KEYS[1], ARGV[1])
local clamped = 0
if remaining < 0 then
  redis.call('SET', KEYS[1], '0', 'KEEPTTL')
  remaining = 0
  clamped = 1
end

-- Remembered only while the counter has a window to end with, so that the
-- record can never outlive it.
local pttl = redis.call('PTTL', KEYS[1])
if pttl > 0 and redis.call('HLEN', KEYS[2]) < tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[2], field, string.format('%d:%d', clamped, remaining))
  redis.call('PEXPIRE', KEYS[2], pttl)
end
return {remaining, clamped}
