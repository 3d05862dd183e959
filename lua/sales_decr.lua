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
-- A single {-1, -1}: the call's own arguments are unusable.
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
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and positive(ARGV[2], 10) and n >= 1 and n <= 64)
    or changes < 1 or changes > MAX_CHANGES or changes ~= math.floor(changes) then
  return {-1, -1}
end

local a = applied(KEYS[1], 'r:' .. src)

-- Each window is read once, and written once at the end when it changed.
-- One whose key holds no string is unusable.
local windows = {}
local function window(i)
  local w = windows[i]
  if not w then
    w = {key = KEYS[1 + i]}
    local got = pcall('GET', w.key)
    w.unusable = type(got) == 'table'
    w.v = not w.unusable and tonumber(got)
    windows[i] = w
  end
  return w
end

-- subtract takes amount from w: what remains and whether it was clamped,
-- or nil when the window holds no integer.
local function subtract(w, amount)
  local remaining
  if w.v >= TWO53 then
    -- Past 2^53 Lua's doubles round: DECRBY subtracts in int64, from the
    -- counter as this call has it so far.
    if w.changed then
      call('SET', w.key, format('%d', w.v), 'KEEPTTL')
      w.changed = false
    end
    remaining = pcall('DECRBY', w.key, amount)
    if type(remaining) ~= 'number' then
      return nil
    end
  else
    remaining, w.changed = w.v - tonumber(amount), true
  end
  local clamped = 0
  if remaining < 0 then
    remaining, clamped, w.changed = 0, 1, true
  end
  w.v = remaining
  return remaining, clamped
end

local reply = {}
for c = 0, changes - 1 do
  local at = 3 + 4 * c
  local i, off, id, amount = tonumber(ARGV[at]), ARGV[at + 1], ARGV[at + 2], ARGV[at + 3]
  local v, flag = -1, -1
  if i and i >= 1 and i <= n and i == math.floor(i) and offset(off)
      and type(id) == 'string' and #id == 8 and positive(amount, 18) then
    local fresh = counts(a, tonumber(off))
    local w = window(i)
    if w.unusable then
      v, flag = -1, -1
    elseif not w.v or w.v <= 0 then
      v, flag = 0, 0
    elseif not fresh then
      v, flag = w.v, 0
    else
      v, flag = subtract(w, amount)
      if not v then
        v, flag = -1, -1
      end
    end
  end
  reply[#reply + 1], reply[#reply + 2] = v, flag
end

-- SET with KEEPTTL keeps the window's end.
for _, w in pairs(windows) do
  if w.changed then
    call('SET', w.key, format('%d', w.v), 'KEEPTTL')
  end
end
-- A refund makes no window and no mark, which incr_and_check gives the
-- offsets their lifetime for: they get one here only with a new field.
if write(a) == 1 then
  call('EXPIRE', KEYS[1], ARGV[2])
end
return reply
