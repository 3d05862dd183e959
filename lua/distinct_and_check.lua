-- distinct_and_check: count the distinct values of one field among a run of
-- orders, all from one Kafka partition and in its order, in the windows
-- (fixed or sliding) of the rules of one group, each order at most once,
-- and tell for each whether it crossed a threshold first.
--
-- KEYS[3i-2]  window i: a hash of the group's newest event time (t), the
--             last offset counted from each source partition and the ids of
--             its latest events (r), as incr_and_check keeps them
-- KEYS[3i-1]  window i's values: a sorted set of value -> the time it was
--             last seen, kept to the threshold + 1 latest
-- KEYS[3i]    window i's crossing marks: a hash of event id -> value
-- ARGV[1]     the source partition's field name, 1 to 32 bytes
-- ARGV[2]     how long crossing marks live, seconds
-- ARGV[3]     n, the number of windows
-- ARGV[4..]   per window: 'fixed' or 'sliding'; its length, milliseconds;
--             its lateness, milliseconds (sliding); threshold (1..10000);
--             how long it lives, seconds (fixed: from its first event;
--             sliding: after its last change)
-- then        per change: window index (1..n), offset, event id (8 bytes),
--             event time (milliseconds since 1970), value (1 to 64 bytes)
--
-- Reply: two integers per change, in order: {count, 1} for the order that
-- took the count from below the threshold to at or above it (again for its
-- redeliveries), {count, 0} otherwise, {count, 2} for a late order (sliding:
-- older than the group's newest time minus length minus lateness; not
-- counted), {-1, -1} for unusable arguments (nothing written for it); a
-- single {-1, -1} when the call's own are.
--
-- A fixed window starts with its group's first order, as incr_and_check's
-- do, and counts every distinct value until it ends. A sliding window's
-- count at an order is the number of values seen in the length before its
-- time. An order out of order is judged by the larger of its own window
-- and the one that ends at the group's newest time. Keeping only the threshold
-- + 1 latest values keeps every count exact up to threshold + 1, which is
-- all a crossing needs; an order out of order may miss values whose last
-- sighting came after it.
local LATEST = 4
local MAX_WINDOWS, MAX_CHANGES, MAX_THRESHOLD = 64, 512, 10000
local call, tonumber, match, find, sub, format = redis.call, tonumber, string.match, string.find, string.sub, string.format
local floor, max = math.floor, math.max
local KEYS, ARGV = KEYS, ARGV

-- Straight-line code, as incr_and_check: Redis runs a script's chunk anew
-- at every call, so each local function would be a closure made again, and
-- each use of one a Lua call frame (Performance). Numbers are digit strings
-- without leading zeros.
local DIGITS = '^[1-9]%d*$'

local src, n = ARGV[1], tonumber(ARGV[3])
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and type(ARGV[3]) == 'string'
    and #ARGV[2] <= 10 and match(ARGV[2], DIGITS) and #ARGV[3] <= 2 and match(ARGV[3], DIGITS)
    and n <= MAX_WINDOWS and #KEYS == 3 * n) then
  return {-1, -1}
end
local first_change = 4 + 5 * n
local changes = (#ARGV - first_change + 1) / 5
if changes < 1 or changes > MAX_CHANGES or changes ~= floor(changes) then
  return {-1, -1}
end
local usable = {}
for i = 1, n do
  local a = 4 * i + (i - 1)
  local kind, len, lt, th, tl = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  usable[i] = (kind == 'fixed' or kind == 'sliding') and #len <= 13 and match(len, DIGITS)
      and #lt <= 13 and (lt == '0' or match(lt, DIGITS)) and #th <= 5 and match(th, DIGITS)
      and tonumber(th) <= MAX_THRESHOLD and #tl <= 10 and match(tl, DIGITS) and true
end

-- Every window is read once, on its first change, and written once.
local windows = {}
local reply, r = {}, 0
for a = first_change, #ARGV, 5 do
  local i, off, id, ts, value = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  if not (i and i >= 1 and i <= n and i == floor(i) and usable[i] and #off <= 15 and (off == '0' or match(off, DIGITS))
      and #id == 8 and #ts <= 15 and (ts == '0' or match(ts, DIGITS)) and #value >= 1 and #value <= 64) then
    reply[r + 1], reply[r + 2] = -1, -1
  else
    local w = windows[i]
    if not w then
      local c = 4 * i + (i - 1)
      w = {key = KEYS[3 * i - 2], values = KEYS[3 * i - 1], marks = KEYS[3 * i],
        sliding = ARGV[c] == 'sliding', length = tonumber(ARGV[c + 1]), late = tonumber(ARGV[c + 2]),
        threshold = tonumber(ARGV[c + 3]), ttl = ARGV[c + 4]}
      local got = call('HMGET', w.key, 't', src, 'r')
      w.newest, w.new, w.last, w.latest = tonumber(got[1]), not got[1], tonumber(got[2]), got[3] or ''
      if not w.sliding then
        w.count = call('ZCARD', w.values)
      end
      windows[i] = w
    end
    local o, t = tonumber(off), tonumber(ts)
    -- Known: at or below its partition's last offset, or among the latest
    -- ids (an 8-byte id at an 8-byte boundary).
    local again = w.last and o <= w.last
    if not again then
      local at = find(w.latest, id, 1, true)
      while at do
        if at % 8 == 1 then
          again = true
          break
        end
        at = find(w.latest, id, at + 1, true)
      end
    end
    local mark
    if again or not w.last then
      if w.has_marks == nil then
        w.has_marks = call('EXISTS', w.marks) == 1
      end
      mark = w.has_marks and call('HGET', w.marks, id)
    end
    if mark then
      reply[r + 1], reply[r + 2] = tonumber(mark), 1
    elseif again or (w.sliding and w.newest and t <= w.newest - w.length - w.late) then
      -- A redelivered or late order is answered the count of the window
      -- that ends at the group's newest time.
      local cur = w.count
      if w.sliding then
        cur = w.newest and call('ZCOUNT', w.values, '(' .. format('%d', w.newest - w.length), '+inf') or 0
      end
      reply[r + 1], reply[r + 2] = cur, again and 0 or 2
    else
      local now, crossing
      if w.sliding then
        -- The value at t is the count of its own window, (t - length, t];
        -- an order out of order is also judged by the window ending at the
        -- newest time, and the larger of the two decides, so that an order
        -- whose own window catches up with a newer one that crossed
        -- already is no new crossing.
        local last = tonumber(call('ZSCORE', w.values, value))
        local from = t - w.length
        local inorder = not w.newest or t >= w.newest
        local own = call('ZCOUNT', w.values, '(' .. format('%d', from), inorder and '+inf' or format('%d', t))
        local own_after = own
        if not last or last <= from then
          own_after = own + 1
        end
        local before, after = own, own_after
        if not inorder then
          local cur_from = w.newest - w.length
          local cur = call('ZCOUNT', w.values, '(' .. format('%d', cur_from), '+inf')
          local cur_after = cur
          if t > cur_from and (not last or last <= cur_from) then
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
      if not w.newest or t > w.newest then
        w.newest = t
      end
      w.last, w.dirty = o, true
      w.latest = sub(w.latest .. id, -8 * LATEST)
      if crossing then
        call('HSET', w.marks, id, format('%d', now))
        call('EXPIRE', w.marks, ARGV[2])
        w.has_marks = true
        reply[r + 1], reply[r + 2] = now, 1
      else
        reply[r + 1], reply[r + 2] = now, 0
      end
    end
  end
  r = r + 2
end

for _, w in pairs(windows) do
  if w.dirty then
    call('HSET', w.key, 't', format('%d', w.newest), src, format('%d', w.last), 'r', w.latest)
    -- Only the threshold + 1 latest values can matter.
    call('ZREMRANGEBYRANK', w.values, 0, -(w.threshold + 2))
    if w.sliding then
      -- Values too old for any window an order may still be judged in.
      call('ZREMRANGEBYSCORE', w.values, '-inf', format('%d', w.newest - 2 * w.length - w.late))
      call('EXPIRE', w.key, w.ttl)
      call('EXPIRE', w.values, w.ttl)
    elseif w.new or call('TTL', w.key) == -1 then
      -- As incr_and_check's windows: a running window keeps its end.
      call('EXPIRE', w.key, w.ttl)
      call('EXPIRE', w.values, w.ttl)
    end
  end
end
return reply
