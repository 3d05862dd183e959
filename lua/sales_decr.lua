-- sales_decr: subtract a refund from a window's amount counter without
-- touching the window's end and without going below zero.
--
-- KEYS[1]  the amount counter
-- ARGV[1]  refund amount, a positive integer
--
-- Reply: {remaining, clamped}
--   {-1, -1}        the amount is unusable; nothing written
--   {0, 0}          no counter (window over, or nothing counted); nothing written
--   {remaining, 0}  counter lowered by the amount
--   {0, 1}          the refund was larger than the counter: clamped at 0
--
-- The second element exists so the caller can count clamps; a bare
-- remaining value of 0 cannot tell a full refund from an oversized one.
local amount = ARGV[1]
if not (type(amount) == 'string' and #amount <= 18 and string.match(amount, '^[1-9]%d*$')) then
  return {-1, -1}
end

local current = tonumber(redis.call('GET', KEYS[1]))
if not current or current <= 0 then
  return {0, 0}
end

local remaining = current - tonumber(amount)
local clamped = 0
if remaining < 0 then
  remaining = 0
  clamped = 1
end
-- SET would drop the TTL and turn the window counter into a permanent key;
-- KEEPTTL keeps the window's end. string.format keeps large values out of
-- exponent notation.
redis.call('SET', KEYS[1], string.format('%d', remaining), 'KEEPTTL')
return {remaining, clamped}
