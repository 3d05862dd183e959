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
-- ARGV[2]     how long crossing marks live, seconds
-- ARGV[3]     n, the number of windows
-- ARGV[4..]   per window: 'fixed' or 'sliding'; its length, milliseconds;
--             its lateness, milliseconds (sliding); threshold (1..10000);
--             how long it lives, seconds (fixed: from its first event;
--             sliding: after its last change)
-- then        per change: window index (1..n), offset, event id (8 bytes),
--             event time (milliseconds since 1970), value (1 to 64 bytes;
--             the engine sends the first 8 bytes of the field's SHA-256,
--             lua.ValueOf, so that a long value costs 8 bytes)
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

local src, n_s = ARGV[1], ARGV[3]
local n = tonumber(n_s)
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and find(src, ':', 1, true)
    and type(ARGV[2]) == 'string' and #ARGV[2] <= 10 and match(ARGV[2], DIGITS)
    and type(n_s) == 'string' and #n_s <= 2 and match(n_s, DIGITS) and n <= MAX_WINDOWS and #KEYS == 3 * n + 1) then
  return {-1, -1}
end
local first_change = 4 + 5 * n
local changes = (#ARGV - first_change + 1) / 5
if changes < 1 or changes > MAX_CHANGES or changes ~= floor(changes) then
  return {-1, -1}
end
-- A window with an unusable type, length, lateness, threshold or lifetime
-- refuses its changes; the others still count. The offsets live as long as
-- the marks or the longest-lived window, whichever is longer.
local usable, life, longest = {}, ARGV[2], tonumber(ARGV[2])
for i = 1, n do
  local a = 5 * i - 1
  local kind, len, lt, th, tl = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local ttl = #tl <= 10 and match(tl, DIGITS) and tonumber(tl)
  usable[i] = (kind == 'fixed' or kind == 'sliding') and #len <= 13 and match(len, DIGITS)
      and #lt <= 13 and (lt == '0' or match(lt, DIGITS)) and #th <= 5 and match(th, DIGITS)
      and tonumber(th) <= MAX_THRESHOLD and ttl and true
  if usable[i] and ttl > longest then
    life, longest = tl, ttl
  end
end

local field = 'd:' .. src
local last, last_s = applied(KEYS[1], field)
local advanced, refresh = false, false

-- Every window is read once, on its first change, and written once. An
-- event's changes share its offset, and a call's changes its windows'
-- indices: each string is checked once in a row.
local windows = {}
local reply, r = {}, 0
local is_seen, i, off_seen, o
for c = first_change, #ARGV, 5 do
  local is, off, id, ts, value = ARGV[c], ARGV[c + 1], ARGV[c + 2], ARGV[c + 3], ARGV[c + 4]
  if is ~= is_seen then
    is_seen, i = is, #is <= 2 and match(is, DIGITS) and tonumber(is)
  end
  if off ~= off_seen then
    off_seen, o = off, #off <= 15 and (off == '0' or match(off, DIGITS)) and tonumber(off)
  end
  local v, flag = -1, -1
  if i and usable[i] and o and #id == 8 and #ts <= 15 and (ts == '0' or match(ts, DIGITS))
      and #value >= 1 and #value <= 64 then
    local w = windows[i]
    if not w then
      local a = 5 * i - 1
      w = {key = KEYS[3 * i - 1], values = KEYS[3 * i], marks = KEYS[3 * i + 1],
        sliding = ARGV[a] == 'sliding', length = tonumber(ARGV[a + 1]), late = tonumber(ARGV[a + 2]),
        threshold = tonumber(ARGV[a + 3]), ttl = ARGV[a + 4]}
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
      last, last_s, advanced = o, off, true
    else
      fresh = advanced and o == last
    end
    if fresh and w.old and o <= w.old then
      fresh = false
    end
    local t = tonumber(ts)
    -- Marks of another type are none.
    local mark = not fresh and tonumber(pcall('HGET', w.marks, id))
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
          local marked = format('%d', now)
          local set = pcall('HSET', w.marks, id, marked)
          if type(set) == 'table' then
            if sub(set.err, 1, 9) == 'WRONGTYPE' then
              call('DEL', w.marks)
            end
            call('HSET', w.marks, id, marked)
          end
          call('EXPIRE', w.marks, ARGV[2])
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
if advanced and call('HSET', KEYS[1], field, last_s) == 1 or refresh then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  if call('EXPIRE', KEYS[1], life, 'GT') == 0 then
    call('EXPIRE', KEYS[1], life, 'NX')
  end
end
return reply
