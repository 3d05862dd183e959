-- slide_and_check: count a run of orders and refunds, all from one Kafka
-- partition and in its order, into the sliding event-time windows of the
-- rules of one bucket of groups, each event at most once, and tell for
-- each order whether it crossed a threshold first.
--
-- A window is cut into buckets, span of them a window's length; the caller
-- gives each event its bucket (its event time divided by the bucket width).
-- The value at an event is the total of the buckets of the window that
-- ends with its own: every event of the last window but at most one
-- bucket's worth at its trailing edge.
--
-- KEYS[1]     the bucket's offsets: a hash with a field per source partition
--             and script, the last offset applied here from it
-- KEYS[2i]    window i: a hash of the group's newest bucket (k) and one
--             field per bucket (its number) holding the bucket's total
-- KEYS[2i+1]  window i's crossing marks: a hash of event id -> value
-- ARGV[1]     the source partition's name, 1 to 32 bytes with a ':'
--             (which no bucket's field has)
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go):
--             how long crossing marks live, seconds (uint32, >= 1); n, the
--             number of windows (uint8, 1..64); per window: span (uint16,
--             buckets a window, 1..1000), lateness in buckets (uint16,
--             0..4000), threshold (int64, 1..2^53-1), how long the hash
--             lives after its last change, seconds (uint32, >= 1); then per
--             change: window index (uint8, 1..n), offset (int64,
--             0..10^15-1), event id (8 bytes), bucket (int64, 0..10^15-1),
--             amount (int64, 1..2^53-1 for an order, its negative for a
--             refund). 5 + 16 n + 33 a change bytes.
--
-- Reply: two integers per change, in order:
--   {value, 1}   an order that took the value from below the threshold to
--                at or above it (again for its redeliveries)
--   {value, 0}   counted, or counted before (a redelivery)
--   {value, 2}   late: its bucket is older than the group's newest bucket
--                minus span minus lateness; not counted, nothing written
--   {value, 3}   a refund larger than what its window held, which is now 0
--   {-1, -1}     its arguments are unusable, or its window's key holds
--                another type (written by another); nothing written for it
-- A single {-1, -1}: the call's own arguments are unusable. Marks of
-- another type are none, and a crossing replaces them; so are offsets of
-- another type, and they are replaced. Such keys never fail the call.
--
-- An order out of order (an older bucket than the group's newest) is judged
-- by every window it falls into: it crossed when the largest of them went
-- from below the threshold to at or above it. A refund subtracts from the
-- buckets of its window, newest first, and never below zero; a group with
-- nothing counted ignores it ({0, 0}).
--
-- "Already counted?" is asked once per event, as incr_and_check asks it:
-- by the bucket's offsets (the prelude), in a field of this script's own.
-- A redelivery changes nothing and is answered its mark, or the window's
-- value. A window written by the old layout still holds a field per source
-- partition (its name, with a ':') with the last offset it counted, and
-- `r`: the field is obeyed, and both go when the window counts a later
-- offset. Buckets older than two spans and the lateness behind the newest
-- are removed, so that a group holds at most 2 * span + lateness + 1
-- buckets.
--
-- It runs after prelude.lua, which it shares with incr_and_check and
-- sales_decr; straight-line code as they are (the prelude says why).
-- Bounds keep a group's buckets (2 * span + lateness) few enough for one
-- HDEL of them all.
local MAX_WINDOWS, MAX_CHANGES, MAX_SPAN, MAX_LATE = 64, 512, 1000, 4000
local BIG = TWO53 -- a bucket saturates here, above any threshold
local find, min, floor, unpack = string.find, math.min, math.floor, unpack

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and find(src, ':', 1, true) and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5 - 16 * n) / 33
if not (life >= 1 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 2 * n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
-- A window with an unusable span, lateness, threshold or lifetime refuses
-- its changes; the others still count. The offsets live as long as the
-- marks or the longest-lived window, whichever is longer.
local params, longest = {}, life
for i = 1, n do
  local span, late, threshold, ttl
  span, late, threshold, ttl, pos = decode('<HHi8I4', packed, pos)
  if span >= 1 and span <= MAX_SPAN and late <= MAX_LATE and threshold >= 1 and threshold < TWO53 and ttl >= 1 then
    params[i] = {span, late, threshold, ttl}
    if ttl > longest then
      longest = ttl
    end
  end
end

local field = 's:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or nil
local advanced, refresh = false, false

-- The loop runs for every change: what a change needs is inline, and so
-- are the rare paths (a window's first read, a refund, an order out of
-- order, a crossing, a change applied before). Every window is read once,
-- on its first change, and written once. A change's event id is read
-- (sub) only where it is needed, a crossing or a redelivery.
local windows = {}
local reply, r = {}, 0
for _ = 1, changes do
  local at, i, o, k, inc = pos
  i, o, k, inc, pos = decode('<Bi8xxxxxxxxi8i8', packed, pos)
  local refund = inc < 0
  if refund then
    inc = -inc
  end
  local v, flag = -1, -1
  local p = i >= 1 and i <= n and o >= 0 and o < OFFSETS and k >= 0 and k < OFFSETS
      and inc >= 1 and inc < TWO53 and params[i]
  if p then
    local w = windows[i]
    if not w then
      w = {key = KEYS[2 * i], span = p[1], late = p[2], threshold = p[3], ttl = format('%d', p[4]),
        b = {}, touched = {}, total = 0}
      -- A window key of another type is unusable: its changes answer
      -- {-1, -1} (a change counted before, its mark), and nothing is
      -- written to it.
      local got = pcall('HGETALL', w.key)
      if got.err then
        w.unusable, got = true, {}
      end
      local b = w.b
      w.new = #got == 0
      for j = 1, #got, 2 do
        local f, x = got[j], got[j + 1]
        if f == 'k' then
          w.newest = tonumber(x)
        elseif match(f, '^%d+$') then
          b[tonumber(f)] = tonumber(x)
        elseif f == src then
          -- The old layout's last offset counted from this partition.
          w.old = tonumber(x) or -1
        elseif f == 'r' then
          w.r = true
        end
      end
      if w.newest then
        local since, total = w.newest - w.span, 0
        for k, x in pairs(b) do
          if k > since then
            total = total + x
          end
        end
        w.total = total
      end
      windows[i] = w
    end
    -- Counted before: at or below the last offset applied, and not this
    -- call's own (an event's other windows); or, in a window of the old
    -- layout, at or below the last offset it counted from the partition.
    local fresh = not last or o > last
    if fresh then
      last, advanced = o, true
    else
      fresh = advanced and o == last
    end
    if fresh and w.old and o <= w.old then
      fresh = false
    end
    if not fresh then
      -- Applied before: an order's mark, or the window's value. Marks of
      -- another type are none.
      local mark = not refund and tonumber(pcall('HGET', KEYS[2 * i + 1], sub(packed, at + 9, at + 16)))
      if mark then
        v, flag = mark, 1
      elseif not w.unusable then
        v, flag = w.total, 0
      end
    elseif w.unusable then
      v, flag = -1, -1
    elseif refund and not w.newest then
      v, flag = 0, 0
    elseif w.newest and k <= w.newest - w.span - w.late then
      v, flag = w.total, 2
    else
      local b, span, newest = w.b, w.span, w.newest
      if not newest or k > newest then
        -- The newest bucket moves to k: the buckets that leave the window
        -- leave its total, at most span of them.
        if newest and k - span < newest then
          local total = w.total
          for j = newest - span + 1, k - span do
            total = total - (b[j] or 0)
          end
          w.total = total
        else
          w.total = 0
        end
        -- A window that never ends renews the offsets once a window
        -- length, as a fixed rule's new windows do.
        if newest and floor(k / span) > floor(newest / span) then
          w.renew = true
        end
        w.newest, newest = k, k
      end
      if refund then
        -- Subtracted from the buckets of its window, newest first; nothing
        -- when the window held nothing (the window moved on all the same,
        -- unsaved).
        local left = inc
        for j = k, k - span + 1, -1 do
          local x = b[j]
          if x and x > 0 then
            local d = min(x, left)
            b[j] = x - d
            w.touched[j] = true
            if j > newest - span then
              w.total = w.total - d
            end
            left = left - d
            if left == 0 then
              break
            end
          end
        end
        if left == inc then
          v, flag = 0, 0
        else
          v, flag = w.total, left == 0 and 0 or 3
          w.dirty = true
        end
      else
        -- An order out of order is judged by the largest of the windows it
        -- falls into, those ending at k up to the newest: at most 2 * span
        -- buckets read.
        local before = w.total
        if k < newest then
          local sum = 0
          for j = k - span + 1, k do
            sum = sum + (b[j] or 0)
          end
          before = sum
          for j = k + 1, min(k + span - 1, newest) do
            sum = sum + (b[j] or 0) - (b[j - span] or 0)
            if sum > before then
              before = sum
            end
          end
        end
        local was = b[k] or 0
        b[k] = min(was + inc, BIG)
        w.touched[k] = true
        if k > newest - span then
          w.total = w.total + b[k] - was
        end
        v = before + inc
        flag = (before < w.threshold and v >= w.threshold) and 1 or 0
        w.dirty = true
        if flag == 1 then
          -- Marks of another type are replaced: a crossing leaves its
          -- mark. Any other error (out of memory) fails the call.
          local marks, marked, id = KEYS[2 * i + 1], format('%d', v), sub(packed, at + 9, at + 16)
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
  end
  reply[r + 1], reply[r + 2] = v, flag
  r = r + 2
end

for _, w in pairs(windows) do
  if w.dirty then
    local oldest = w.newest - 2 * w.span - w.late
    local set = {'k', format('%d', w.newest)}
    local gone = {}
    for j, x in pairs(w.b) do
      if j <= oldest or x <= 0 then
        gone[#gone + 1] = format('%d', j)
      elseif w.touched[j] then
        set[#set + 1], set[#set + 2] = format('%d', j), format('%d', x)
      end
    end
    -- The old layout's fields go: the window counted an offset past the
    -- old one, which the bucket's offsets now hold.
    if w.old then
      gone[#gone + 1] = src
    end
    if w.r then
      gone[#gone + 1] = 'r'
    end
    call('HSET', w.key, unpack(set))
    if #gone > 0 then
      call('HDEL', w.key, unpack(gone))
    end
    -- A sliding window never ends while its group is active: it lives a
    -- while after its last change.
    call('EXPIRE', w.key, w.ttl)
    refresh = refresh or w.new or w.renew
  end
end

-- The offsets get their lifetime when the field is new, a window is new
-- or passes a multiple of its span (one that stays open never ends), or a
-- mark got one: they then outlive every window and mark of the bucket.
if advanced and call('HSET', KEYS[1], field, format('%d', last)) == 1 or refresh then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  local l = format('%d', longest)
  if call('EXPIRE', KEYS[1], l, 'GT') == 0 then
    call('EXPIRE', KEYS[1], l, 'NX')
  end
end
return reply
