-- distinct_and_check: count the distinct values of one field among a run of
-- orders, all from one Kafka partition and in its order, in the windows
-- (fixed or sliding) of the rules of one bucket of groups, each order at
-- most once, and tell for each whether it crossed a threshold first.
--
-- KEYS[1]     the bucket's offsets: a hash with a field per source partition
--             and script, the last offset applied here from it
-- KEYS[3i-1]  window i: a hash of the group's newest event time (t)
-- KEYS[3i]    window i's values: a sorted set of value -> the time it was
--             last seen, kept to the threshold + 1 latest
-- KEYS[3i+1]  window i's crossing marks: a hash of event id -> value
-- ARGV[1]     the source partition's name, 1 to 32 bytes with a ':' (which
--             neither t nor r has)
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go):
--             how long crossing marks live, seconds (uint32, >= 1); n, the
--             number of windows (uint8, 1..64); per window: its kind
--             (uint8: 1 fixed, 2 sliding); its length, milliseconds (int64,
--             1..10^13-1); its lateness, milliseconds (int64, 0..10^13-1;
--             sliding); threshold (uint16, 1..10000); how long it lives,
--             seconds (uint32, >= 1; fixed: from its first event; sliding:
--             after its last change); then per change: window index (uint8,
--             1..n), offset (int64, 0..10^15-1), event id (8 bytes), event
--             time (int64, milliseconds since 1970, 0..10^15-1), value (8
--             bytes: the first 8 bytes of the field's SHA-256, lua.ValueOf).
--             5 + 23 n + 33 a change bytes.
--
-- Reply: two integers per change, in order: {count, 1} for the order that
-- took the count from below the threshold to at or above it (again for its
-- redeliveries), {count, 0} otherwise, {count, 2} for a late order (sliding:
-- older than the group's newest time minus length minus lateness; not
-- counted), {-1, -1} for unusable arguments, or a window whose hash or
-- values hold another type (written by another; nothing written for it);
-- a single {-1, -1} when the call's own are. Marks of another type are
-- none, and a crossing replaces them; so are offsets of another type, and
-- they are replaced. Such keys never fail the call.
--
-- A fixed window starts with its group's first order, as incr_and_check's
-- do, and counts every distinct value until it ends. A sliding window's
-- count at an order is the number of values seen in the length before its
-- time. An order out of order is judged by the larger of its own window
-- and the one that ends at the group's newest time. Keeping only the threshold
-- + 1 latest values keeps every count exact up to threshold + 1, which is
-- all a crossing needs; an order out of order may miss values whose last
-- sighting came after it.
--
-- "Already counted?" is asked once per event, as incr_and_check asks it:
-- by the bucket's offsets (the prelude), in a field of this script's own.
-- A redelivery changes nothing and is answered its mark, or the count of
-- the window that ends at the group's newest time. A window written by the
-- old layout still holds a field per source partition (its name, with a
-- ':') with the last offset it counted, and `r`: the field is obeyed, and
-- both go when the window counts a later offset.
--
-- It runs after prelude.lua, which it shares with the other counting
-- scripts; straight-line code as they are (the prelude says why).
local MAX_WINDOWS, MAX_CHANGES, MAX_THRESHOLD = 64, 512, 10000
local find, floor, max = string.find, math.floor, math.max

local LENGTHS = 10000000000000 -- 10^13 ms

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and find(src, ':', 1, true) and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5 - 23 * n) / 33
if not (life >= 1 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 3 * n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
-- A window with an unusable kind, length, lateness, threshold or lifetime
-- refuses its changes; the others still count. The offsets live as long as
-- the marks or the longest-lived window, whichever is longer.
local params, longest = {}, life
for i = 1, n do
  local kind, length, late, threshold, ttl
  kind, length, late, threshold, ttl, pos = decode('<Bi8i8HI4', packed, pos)
  if (kind == 1 or kind == 2) and length >= 1 and length < LENGTHS and late >= 0 and late < LENGTHS
      and threshold >= 1 and threshold <= MAX_THRESHOLD and ttl >= 1 then
    params[i] = {kind == 2, length, late, threshold, ttl}
    if ttl > longest then
      longest = ttl
    end
  end
end

local field = 'd:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or nil
local advanced, refresh = false, false

-- Every window is read once, on its first change, and written once. A
-- change's event id and value are read (sub) only where they are needed.
local windows = {}
local reply, r = {}, 0
for _ = 1, changes do
  local at, i, o, t = pos
  i, o, t, pos = decode('<Bi8xxxxxxxxi8xxxxxxxx', packed, pos)
  local v, flag = -1, -1
  local p = i >= 1 and i <= n and o >= 0 and o < OFFSETS and t >= 0 and t < OFFSETS and params[i]
  if p then
    local w = windows[i]
    if not w then
      w = {key = KEYS[3 * i - 1], values = KEYS[3 * i], marks = KEYS[3 * i + 1],
        sliding = p[1], length = p[2], late = p[3], threshold = p[4], ttl = format('%d', p[5])}
      -- A window whose hash or values hold another type is unusable: its
      -- changes answer {-1, -1} (a change counted before, its mark), and
      -- nothing is written to it. A sliding window's values are first
      -- read by a change (ZSCORE, ZCOUNT), which finds it out then.
      local got = pcall('HMGET', w.key, 't', src, 'r')
      if got.err then
        w.unusable = true
      else
        w.newest, w.new = tonumber(got[1]), not got[1]
        if got[2] then
          -- The old layout's last offset counted from this partition.
          w.old = tonumber(got[2]) or -1
        end
        w.r = got[3] and true
        if not w.sliding then
          w.count = pcall('ZCARD', w.values)
          w.unusable = type(w.count) == 'table'
        end
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
    -- Marks of another type are none.
    local mark = not fresh and tonumber(pcall('HGET', w.marks, sub(packed, at + 9, at + 16)))
    if mark then
      v, flag = mark, 1
    elseif w.unusable then
      v, flag = -1, -1
    elseif not fresh or (w.sliding and w.newest and t <= w.newest - w.length - w.late) then
      -- A redelivered or late order is answered the count of the window
      -- that ends at the group's newest time.
      v, flag = w.count, fresh and 2 or 0
      if w.sliding then
        v = w.newest and pcall('ZCOUNT', w.values, '(' .. format('%d', w.newest - w.length), '+inf') or 0
        if type(v) == 'table' then
          w.unusable, v, flag = true, -1, -1
        end
      end
    else
      local now, crossing
      local value = sub(packed, at + 25, at + 32)
      local seen = w.sliding and pcall('ZSCORE', w.values, value)
      if type(seen) == 'table' then
        w.unusable = true
      elseif w.sliding then
        -- The value at t is the count of its own window, (t - length, t];
        -- an order out of order is also judged by the window ending at the
        -- newest time, and the larger of the two decides, so that an order
        -- whose own window catches up with a newer one that crossed
        -- already is no new crossing.
        seen = tonumber(seen)
        local from = t - w.length
        local inorder = not w.newest or t >= w.newest
        local own = call('ZCOUNT', w.values, '(' .. format('%d', from), inorder and '+inf' or format('%d', t))
        local own_after = own
        if not seen or seen <= from then
          own_after = own + 1
        end
        local before, after = own, own_after
        if not inorder then
          local cur_from = w.newest - w.length
          local cur = call('ZCOUNT', w.values, '(' .. format('%d', cur_from), '+inf')
          local cur_after = cur
          if t > cur_from and (not seen or seen <= cur_from) then
            cur_after = cur + 1
          end
          before, after = max(own, cur), max(own_after, cur_after)
        end
        call('ZADD', w.values, 'GT', format('%d', t), value)
        now, crossing = after, before < w.threshold and after >= w.threshold
      else
        local before = w.count
        w.count = before + call('ZADD', w.values, format('%d', t), value)
        now, crossing = w.count, before < w.threshold and w.count >= w.threshold
      end
      if w.unusable then
        v, flag = -1, -1
      else
        if not w.newest or t > w.newest then
          -- A sliding window never ends while its group is active: passing
          -- a multiple of its length renews the offsets, once a window
          -- length, as a fixed rule's new windows do.
          if w.sliding and w.newest and floor(t / w.length) > floor(w.newest / w.length) then
            w.renew = true
          end
          w.newest = t
        end
        w.dirty = true
        v, flag = now, crossing and 1 or 0
        if crossing then
          -- Marks of another type are replaced: a crossing leaves its
          -- mark. Any other error (out of memory) fails the call.
          local marked, id = format('%d', now), sub(packed, at + 9, at + 16)
          local set = pcall('HSET', w.marks, id, marked)
          if type(set) == 'table' then
            if sub(set.err, 1, 9) == 'WRONGTYPE' then
              call('DEL', w.marks)
            end
            call('HSET', w.marks, id, marked)
          end
          call('EXPIRE', w.marks, format('%d', life))
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
    call('HSET', w.key, 't', format('%d', w.newest))
    -- The old layout's fields go: the window counted an offset past the
    -- old one, which the bucket's offsets now hold.
    if w.old or w.r then
      call('HDEL', w.key, src, 'r')
    end
    -- Only the threshold + 1 latest values can matter.
    call('ZREMRANGEBYRANK', w.values, 0, -(w.threshold + 2))
    if w.sliding then
      -- Values too old for any window an order may still be judged in.
      call('ZREMRANGEBYSCORE', w.values, '-inf', format('%d', w.newest - 2 * w.length - w.late))
      call('EXPIRE', w.key, w.ttl)
      call('EXPIRE', w.values, w.ttl)
      refresh = refresh or w.new or w.renew
    elseif w.new or call('TTL', w.key) == -1 then
      -- As incr_and_check's windows: a running window keeps its end.
      call('EXPIRE', w.key, w.ttl)
      call('EXPIRE', w.values, w.ttl)
      refresh = true
    end
  end
end

-- The offsets get their lifetime when the field is new, a window starts
-- (or gets its lifetime again) or a sliding one passes a multiple of its
-- length, or a mark got one: they then outlive every window and mark of
-- the bucket.
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
