-- sales_decr: subtract a run of refunds, all from one Kafka partition and in
-- its order, from the amount windows of the rules of one bucket of groups,
-- each refund at most once, without touching a window's end and without
-- going below zero.
--
-- KEYS[1]     the bucket's offsets, as incr_and_check keeps them
-- KEYS[1+i]   amount window i, as incr_and_check keeps it: a string, its
--             count, or, when its rule keeps evidence, a hash, its count in
--             field 'c' (its evidence in the others, untouched)
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go): how
--             long the bucket's offsets live, seconds (uint32, >= 1); n,
--             the number of windows (uint8, 1..64, #KEYS - 1); per
--             window, 1 when its rule keeps evidence (its window a hash),
--             else 0 (uint8; any other byte reads as 0); then per refund
--             and window: window index (uint8, 1..n), offset (int64,
--             0..10^15-1), event id (8 bytes; not used: incr_and_check's
--             layout), amount (int64, 1..2^53-1). 5 + n + 25 a change
--             bytes.
--
-- Reply: two integers per refund and window, in order:
--   {remaining, 0}  the window lowered by the amount
--   {0, 1}          the refund was larger than the window: clamped at 0
--   {0, 0}          no window (it ended, or nothing was counted); nothing
--                   written to it
--   {-1, -1}        its arguments are unusable, or its window's key is
--                   of another type or its count no number; nothing
--                   written to it, and the others still count
-- A single {-1, -1}: the call's own arguments are unusable. Offsets of
-- another type (written by another) are none, and are replaced. A window's
-- count is written with HSET, or SET KEEPTTL for a string, which keep its
-- TTL, so its end never moves; its evidence stays (an order's entry is
-- named by the count it reached). A window is read in its rule's layout
-- first and in the other when that is refused (a reload turned its
-- evidence on or off), and written back in the layout read. A string of
-- the version before with entries ("<count>" RS entry ...) has its count
-- moved into a hash first, as incr_and_check does, its entries dropped.
--
-- A refund applied before changes nothing and is answered {current, 0}; it
-- is known as incr_and_check knows an event, by its offset, in its own
-- field (refunds come from another source). The second element exists so that the caller can
-- count clamps: a bare 0 cannot tell a full refund from an oversized one.
--
-- It runs after prelude.lua, which it shares with incr_and_check.
local MAX_CHANGES = 4096

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5 - n) / 25
if not (life >= 1 and n >= 1 and n <= 64 and #KEYS == n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
pos = pos + n -- each window's layout, read where it is first read

local field = 'r:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or nil
local dirty = false

-- Each window is read once (values[i]; unusable[i] when its count cannot
-- be read; hashed[i] when it is a hash) and written once, at the end,
-- when changed[i]: one write a window however many refunds a call
-- carries. Past 2^53 Lua's doubles round, and HINCRBY or INCRBY subtracts
-- exactly instead.
local values, unusable, changed, hashed = {}, {}, {}, {}
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
      local got, hash = nil, sub(packed, 5 + i, 5 + i) == '\1'
      if not hash then
        got = pcall('GET', key)
        hash = type(got) == 'table'
        if type(got) == 'string' and not match(got, '^%d+$') then
          -- A string of the version before: the hash's path moves it.
          hash = true
        end
      end
      if hash then
        got = pcall('HGET', key, 'c')
      end
      hashed[i] = hash
      if hash and type(got) == 'table' and sub(got.err, 1, 9) == 'WRONGTYPE' then
        -- A counter of the version before: into a hash, its end kept.
        local old = pcall('GET', key)
        local c = type(old) == 'string' and (match(old, '^(%d+)\30') or match(old, '^%d+$'))
        if c and (c == '0' or match(c, DIGITS)) and (#c < 19 or #c == 19 and c <= '4611686018427387904') then
          local left = call('PTTL', key)
          call('DEL', key)
          call('HSET', key, 'c', c)
          if left > 0 then
            call('PEXPIRE', key, format('%d', left))
          end
          got = c
        end
      end
      unusable[i] = type(got) == 'table' or got and not (got == '0' or match(got, DIGITS))
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
        if hashed[i] then
          remaining = pcall('HINCRBY', key, 'c', format('%d', -amount))
        else
          remaining = pcall('INCRBY', key, format('%d', -amount))
        end
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
  if ch and hashed[i] then
    call('HSET', KEYS[1 + i], 'c', format('%d', values[i]))
  elseif ch then
    call('SET', KEYS[1 + i], format('%d', values[i]), 'KEEPTTL')
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
