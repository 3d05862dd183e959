-- incr_and_check: count a run of events, all from one Kafka partition and
-- in its order, into the fixed windows of the rules of one bucket of groups,
-- each event at most once, and tell for each whether it crossed a threshold
-- first.
--
-- KEYS[1]     the bucket's offsets: a hash with a field per source partition
--             and script, the last offset applied here from it
-- KEYS[2i]    window i: its counter, a string; its TTL is its end. Once
--             the window keeps evidence (evidence_add), the count is
--             followed by its entries: "<count>" RS entry RS entry ...
-- KEYS[2i+1]  window i's crossing marks: a hash of event id -> counter
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go):
--             how long crossing marks live, seconds (uint32, >= 1); n, the
--             number of windows (uint8, 1..64); per window its length,
--             seconds (uint32, >= 1), its threshold (int64, 1..2^53-1), and
--             1 when its rule keeps evidence, which it may then hold after
--             its count, else 0 (uint8);
--             then per event and window: window index (uint8, 1..n),
--             offset (int64, 0..10^15-1), event id (8 bytes), increment
--             (int64, 1..2^53-1). 5 + 13 n + 25 a change bytes.
--
-- Reply: two integers per event and window, in order: {current, 1} when
-- prev < threshold <= current (this event crossed first), {current, 0}
-- otherwise, {-1, -1} when its arguments or its window are unusable: then it
-- wrote nothing to the window, and the others still count. Call arguments
-- that are unusable (keys, source, lifetime, counts) make the reply a single
-- {-1, -1}. A key of another type (written by another) never fails the
-- call: a window's counter is unusable, as above; its marks are none, and
-- a crossing replaces them; the offsets are none, and are replaced.
--
-- "Already counted?" is asked once per event, not per window: the caller
-- sends a partition's events of one bucket in calls that cover increasing,
-- disjoint runs of offsets, and Kafka redelivers a partition in order from
-- its committed offset, so an offset at or below the last one applied here
-- was applied, to every window of this bucket, in the call that applied it.
-- An event applied before changes nothing and is answered the counter as it
-- is, and 1 if it crossed, from its mark, so that its alert is handed off
-- again should the first hand-off have been lost. The offsets outlive the
-- marks and windows: a redelivery may come as late as a mark lives.
--
-- Thresholds and increments are below 2^53, exact in Lua's doubles; a
-- counter past 2^53 is compared exactly, as digits (GET).
--
-- A counter with evidence after its count is not an integer, and INCRBY
-- refuses it: a window whose rule keeps evidence has its head read first
-- (GETRANGE, 45 bytes), and one whose rule keeps none once INCRBY refused
-- it (its evidence turned off since); its count (at most 15 digits, as
-- evidence_add writes them) is added to and written back before the
-- entries (SET KEEPTTL; a value longer than 44 bytes: over the old count
-- in place, SETRANGE, unless it gains a digit), so that the window's end
-- never moves. A count that would pass 15 digits drops the entries (evidence_add
-- keeps none after such a count), and INCRBY counts it exactly; so do the
-- saturation at 2^62 and a window started again (SET EX). Any other value
-- that INCRBY refuses is unusable, as before (Performance, Redis memory).
--
-- It runs after prelude.lua, which it shares with sales_decr.
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO62 = 4611686018427387904
local find, RS = string.find, '\30'

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5 - 13 * n) / 25
if not (life >= 1 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 2 * n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
-- A window with an unusable length or threshold (thresholds[i] false)
-- refuses its changes; the other windows still count. A window whose rule
-- keeps evidence has its threshold negated: one table, read once a change.
-- A window's length is read again from ARGV[2] (at 6 + 13 (i - 1)) on the
-- rare paths that need it, a new window and the offsets' lifetime: tables
-- filled for every window cost a call of 8 changes about a tenth of its
-- time side by side (lua/seedbench/cheapcall/README.md).
local thresholds = {}
for i = 1, n do
  local length, threshold, keep
  length, threshold, keep, pos = decode('<I4i8B', packed, pos)
  thresholds[i] = length >= 1 and threshold >= 1 and threshold < TWO53 and keep <= 1 and (keep == 1 and -threshold or threshold)
end

local field = 'c:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or -1
local dirty, refresh = false, false

-- The loop runs for every change: what a change needs is inline, and the
-- rare paths (a new window, a crossing, a change applied before) are too,
-- so that no function is made for them every call. A change's event id is
-- read (sub) only where it is needed, a crossing or a redelivery.
local reply, r, values = {}, 0, {}
for _ = 1, changes do
  local at, i, o, by = pos
  i, o, by, pos = decode('<Bi8xxxxxxxxi8', packed, pos)
  local t = thresholds[i] -- nil past 1..n
  local v, first = -1, -1
  if t and o >= 0 and o < OFFSETS and by >= 1 and by < TWO53 then
    local keep = t < 0
    if keep then
      t = -t
    end
    local key = KEYS[2 * i]
    -- Counted before: at or below the last offset applied, and not this
    -- call's own (an event's other windows).
    local fresh = o > last -- last is -1 when none was applied
    if fresh then
      last, dirty = o, true
    else
      fresh = dirty and o == last
    end
    if fresh then
      local inc = by == 1 and '1' or format('%d', by)
      -- A window whose rule keeps evidence is read first, and a counter
      -- with entries after its count is added to here; INCRBY would refuse
      -- it, and Redis counts a refusal in its statistics even when the
      -- script handles it (INFO commandstats, errorstats). A window whose
      -- rule keeps none may still hold some (its evidence turned off
      -- since): it is read once INCRBY refused it.
      -- Only the value's head is read (GETRANGE: 45 bytes), not all its
      -- entries. A value of 44 bytes or less is all in hand, and written
      -- whole (SET), which keeps it one allocation (embstr), where
      -- SETRANGE would make it two. A longer one, two already, has a
      -- count as long as before written over in place (SETRANGE): its
      -- entries are copied into Lua and back only when the count gains
      -- a digit.
      local got, rs
      if keep then
        got = pcall('GETRANGE', key, '0', '44')
        rs = type(got) == 'string' and find(got, RS, 1, true)
      end
      if not rs then
        v = pcall('INCRBY', key, inc)
        if not keep and type(v) == 'table' then
          got = pcall('GETRANGE', key, '0', '44')
          rs = type(got) == 'string' and find(got, RS, 1, true)
        end
      end
      if rs then
        local c = rs <= 16 and sub(got, 1, rs - 1)
        v = nil
        if c and (c == '0' or match(c, DIGITS)) then
          v = tonumber(c) + by
          local d = format('%d', v)
          if #d == #c and #got == 45 then
            call('SETRANGE', key, '0', d)
          elseif #d <= 15 then
            call('SET', key, d .. sub(#got < 45 and got or call('GET', key), rs), 'KEEPTTL')
          else
            -- Past 15 digits, which evidence_add writes no entries after,
            -- and near Lua's exact doubles: the count alone.
            call('SET', key, c, 'KEEPTTL')
            v = call('INCRBY', key, inc)
          end
        end
      end
      if type(v) == 'number' then
        first = 0
        if v == by or v >= t then
          -- A window gets its length when it reads -1, which only a new
          -- window or one something made persistent can (a restore, a
          -- migration, PERSIST). The latter is caught when it reaches its
          -- threshold, and its counts are of unknown age: it starts again
          -- with this change alone, so that no alert counts changes older
          -- than the window. A running TTL is never reset, so a steady
          -- trickle cannot keep a window open for ever.
          if call('TTL', key) == -1 then
            if v ~= by then
              call('SET', key, inc, 'EX', format('%d', (decode('<I4', packed, 6 + 13 * (i - 1)))))
              v = by
            else
              call('EXPIRE', key, format('%d', (decode('<I4', packed, 6 + 13 * (i - 1)))))
            end
            refresh = true
          end
          if v >= t then
            local exact
            if v < TWO53 then
              first = (v - by < t) and 1 or 0
            else
              -- Past 2^53 Lua's doubles round: the counter is read as
              -- digits, compared in two parts doubles hold exactly, the
              -- last 9 digits and the rest: v - inc < t, as v < inc + t.
              exact = call('GET', key)
              local function parts(s)
                if #s <= 9 then
                  return 0, tonumber(s)
                end
                return tonumber(sub(s, 1, -10)), tonumber(sub(s, -9))
              end
              local vh, vl = parts(exact)
              local ih, il = parts(inc)
              local th, tl = parts(format('%d', t))
              local sh, sl = ih + th, il + tl
              if sl >= 1000000000 then
                sh, sl = sh + 1, sl - 1000000000
              end
              first = (vh < sh or (vh == sh and vl < sl)) and 1 or 0
            end
            if v >= TWO62 then
              -- Saturate at 2^62, far above any threshold (below 2^53), so
              -- that INCRBY never fails on overflow, which no retry cures.
              call('SET', key, '4611686018427387904', 'KEEPTTL')
              v = TWO62
            end
            if first == 1 then
              -- Marks of another type (written by another) are replaced:
              -- a crossing leaves its mark, or a redelivery would answer
              -- 0 and its alert's hand-off could be lost. Any other error
              -- (out of memory) fails the call.
              local marks, marked, id = KEYS[2 * i + 1], exact or format('%d', v), sub(packed, at + 9, at + 16)
              local set = pcall('HSET', marks, id, marked)
              if type(set) == 'table' then
                if sub(set.err, 1, 9) == 'WRONGTYPE' then
                  call('DEL', marks)
                end
                call('HSET', marks, id, marked)
              end
              call('EXPIRE', marks, format('%d', life))
              refresh = true
            end
          end
        end
      else
        v, first = -1, -1
      end
    else
      -- Applied before: its mark, or the counter as it is (-1 when the
      -- window's key holds no string; its count, before RS, when it holds
      -- evidence). Marks of another type are none.
      local mark = tonumber(pcall('HGET', KEYS[2 * i + 1], sub(packed, at + 9, at + 16)))
      if mark then
        v, first = mark, 1
      else
        -- values holds what redeliveries read, which come before a
        -- call's fresh changes (its offsets increase): a fresh change
        -- does not store its count there, a table write a change.
        if not values[i] then
          local got = pcall('GET', key)
          values[i] = type(got) == 'table' and -1 or tonumber(got) or tonumber(match(got or '', '^(%d+)\30')) or 0
        end
        v = values[i]
        first = v == -1 and -1 or 0
      end
    end
  end
  reply[r + 1], reply[r + 2] = v, first
  r = r + 2
end

-- The offsets get their lifetime when a window or a mark got one, or when
-- the field is new: they then outlive every window and mark of the bucket.
-- A call that only adds to running windows leaves it as it is.
if dirty and call('HSET', KEYS[1], field, format('%d', last)) == 1 or refresh then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  local longest = life
  for w = 1, n do
    local length = decode('<I4', packed, 6 + 13 * (w - 1))
    if thresholds[w] and length > longest then
      longest = length
    end
  end
  local l = format('%d', longest)
  if call('EXPIRE', KEYS[1], l, 'GT') == 0 then
    call('EXPIRE', KEYS[1], l, 'NX')
  end
end
return reply
