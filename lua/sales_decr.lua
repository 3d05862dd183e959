-- sales_decr: subtract a run of refunds, all from one Kafka partition and in
-- its order, from the amount windows of the rules of one bucket of groups,
-- each refund at most once, without touching a window's end and without
-- going below zero.
--
-- KEYS[1]     the bucket's offsets, as incr_and_check keeps them
-- KEYS[1+i]   amount window i, as incr_and_check keeps it: its count,
--             and its evidence after it once it keeps some
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go): how
--             long the bucket's offsets live, seconds (uint32, >= 1); n,
--             the number of windows (uint8, 1..64, #KEYS - 1); then per
--             refund and window: window index (uint8, 1..n), offset (int64,
--             0..10^15-1), event id (8 bytes; not used: incr_and_check's
--             layout), amount (int64, 1..2^53-1). 5 + 25 a change bytes.
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
-- another type (written by another) are none, and are replaced. A window
-- with evidence after its count keeps it: the count is written back before
-- it (SET KEEPTTL); one whose count is not digits (at most 15, as
-- evidence_add writes them) is unusable, as incr_and_check has it.
--
-- A refund applied before changes nothing and is answered {current, 0}; it
-- is known as incr_and_check knows an event, by its offset, in its own
-- field (refunds come from another source). The second element exists so that the caller can
-- count clamps: a bare 0 cannot tell a full refund from an oversized one.
--
-- It runs after prelude.lua, which it shares with incr_and_check.
local MAX_CHANGES = 4096
local find, RS = string.find, '\30'

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5) / 25
if not (life >= 1 and n >= 1 and n <= 64 and #KEYS == n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end

local field = 'r:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or nil
local dirty = false

-- Each window is read once (values[i]; unusable[i] when its key holds no
-- string; entries[i], its evidence, RS and after) and written once, at the
-- end, when changed[i]: one SET a window however many refunds a call
-- carries. Past 2^53 Lua's doubles round, and DECRBY subtracts exactly
-- instead (a window with evidence is below 10^15).
local values, unusable, changed, entries = {}, {}, {}, {}
local reply, r = {}, 0
for _ = 1, changes do
  local i, o, amount
  i, o, amount, pos = decode('<Bi8xxxxxxxxi8', packed, pos)
  local v, flag = -1, -1
  if i >= 1 and i <= n and o >= 0 and o < OFFSETS and amount >= 1 and amount < TWO53 then
    local key = KEYS[1 + i]
    -- Applied before: at or below the last offset applied, and not this
    -- call's own (a refund's other windows).
    local fresh = not last or o > last
    if fresh then
      last, dirty = o, true
    else
      fresh = dirty and o == last
    end
    if values[i] == nil then
      local got = pcall('GET', key)
      unusable[i] = type(got) == 'table'
      local at = type(got) == 'string' and find(got, RS, 1, true)
      if at then
        -- Two statements: miniredis's Lua (the backtest's --lua, the demo)
        -- assigns a multiple assignment's targets as it evaluates them.
        entries[i] = sub(got, at)
        got = sub(got, 1, at - 1)
        unusable[i] = not (at <= 16 and (got == '0' or match(got, DIGITS)))
      end
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
        remaining = pcall('DECRBY', key, format('%d', amount))
      else
        remaining, changed[i] = w - amount, true
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
    call('SET', KEYS[1 + i], format('%d', values[i]) .. (entries[i] or ''), 'KEEPTTL')
  end
end
if dirty and call('HSET', KEYS[1], field, format('%d', last)) == 1 then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  local l = format('%d', life)
  if call('EXPIRE', KEYS[1], l, 'GT') == 0 then
    call('EXPIRE', KEYS[1], l, 'NX')
  end
end
return reply
