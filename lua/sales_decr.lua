-- sales_decr: subtract a run of refunds, all from one Kafka partition and in
-- its order, from the amount windows of the rules of one bucket of groups,
-- each refund at most once, without touching a window's end and without
-- going below zero.
--
-- KEYS[1]     the bucket's offsets, as incr_and_check keeps them
-- KEYS[1+i]   amount window i, as incr_and_check keeps it
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     how long the bucket's offsets live, seconds
-- ARGV[3..]   per refund and window: window index (1..#KEYS-1), offset,
--             event id (8 bytes; checked, not used: incr_and_check's
--             layout), amount
--
-- Reply: two integers per refund and window, in order:
--   {remaining, 0}  the window lowered by the amount
--   {0, 1}          the refund was larger than the window: clamped at 0
--   {0, 0}          no window (it ended, or nothing was counted); nothing
--                   written to it
--   {-1, -1}        its arguments are unusable, or its window's key holds
--                   no integer; nothing written to it, and the others
--                   still count
-- A single {-1, -1}: the call's own arguments are unusable. Offsets of
-- another type (written by another) are none, and are replaced.
--
-- A refund applied before changes nothing and is answered {current, 0}; it
-- is known as incr_and_check knows an event, by its offset, in its own
-- field (refunds come from another source). The second element exists so that the caller can
-- count clamps: a bare 0 cannot tell a full refund from an oversized one.
--
-- It runs after prelude.lua, which it shares with incr_and_check.
local MAX_CHANGES = 4096
local TWO53 = 9007199254740992

local src, n = ARGV[1], #KEYS - 1
local changes = (#ARGV - 2) / 4
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and type(ARGV[2]) == 'string'
    and #ARGV[2] <= 10 and match(ARGV[2], DIGITS) and n >= 1 and n <= 64)
    or changes < 1 or changes > MAX_CHANGES or changes ~= math.floor(changes) then
  return {-1, -1}
end

local field = 'r:' .. src
local last, last_s = applied(KEYS[1], field)
local dirty = false

-- Each window is read once (values[i]; unusable[i] when its key holds no
-- string) and written once, at the end, when changed[i]: one SET a window
-- however many refunds a call carries. Past 2^53 Lua's doubles round, and
-- DECRBY subtracts exactly instead.
local values, unusable, changed = {}, {}, {}
local reply, r = {}, 0
for at = 3, #ARGV, 4 do
  local is, off, id, amount = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local i = #is <= 2 and match(is, DIGITS) and tonumber(is)
  local v, flag = -1, -1
  if i and i <= n and #off <= 15 and (off == '0' or match(off, DIGITS)) and #id == 8
      and #amount <= 18 and match(amount, DIGITS) then
    local o, key = tonumber(off), KEYS[1 + i]
    -- Applied before: at or below the last offset applied, and not this
    -- call's own (a refund's other windows).
    local fresh = not last or o > last
    if fresh then
      last, last_s, dirty = o, off, true
    else
      fresh = dirty and o == last
    end
    if values[i] == nil then
      local got = pcall('GET', key)
      unusable[i] = type(got) == 'table'
      values[i] = not unusable[i] and tonumber(got) or 0
    end
    local w = values[i]
    if unusable[i] then
      v, flag = -1, -1
    elseif w <= 0 then
      v, flag = 0, 0
    elseif not fresh then
      v, flag = w, 0
    else
      local remaining
      if w >= TWO53 then
        if changed[i] then
          call('SET', key, format('%d', w), 'KEEPTTL')
          changed[i] = false
        end
        remaining = pcall('DECRBY', key, amount)
      else
        remaining, changed[i] = w - tonumber(amount), true
      end
      if type(remaining) == 'number' then
        flag = 0
        if remaining < 0 then
          remaining, flag, changed[i] = 0, 1, true
        end
        values[i], v = remaining, remaining
      end
    end
  end
  reply[r + 1], reply[r + 2] = v, flag
  r = r + 2
end

for i, ch in pairs(changed) do
  if ch then
    call('SET', KEYS[1 + i], format('%d', values[i]), 'KEEPTTL')
  end
end
if dirty and call('HSET', KEYS[1], field, last_s) == 1 then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  if call('EXPIRE', KEYS[1], ARGV[2], 'GT') == 0 then
    call('EXPIRE', KEYS[1], ARGV[2], 'NX')
  end
end
return reply
