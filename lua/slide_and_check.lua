-- slide_and_check: count a run of orders and refunds, all from one Kafka
-- partition and in its order, into the sliding event-time windows of the
-- rules of one group, each event at most once, and tell for each order
-- whether it crossed a threshold first.
--
-- A window is cut into buckets, span of them a window's length; the caller
-- gives each event its bucket (its event time divided by the bucket width).
-- The value at an event is the total of the buckets of the window that
-- ends with its own: every event of the last window but at most one
-- bucket's worth at its trailing edge.
--
-- KEYS[2i-1]  window i: a hash of the group's newest bucket (k), the last
--             offset counted from each source partition (named by the
--             caller, with a ':'), the ids of its latest events (r), and one
--             field per bucket (its number) holding the bucket's total
-- KEYS[2i]    window i's crossing marks: a hash of event id -> value
-- ARGV[1]     the source partition's field name, 1 to 32 bytes with a ':'
--             (which no bucket's field has)
-- ARGV[2]     how long crossing marks live, seconds
-- ARGV[3]     n, the number of windows
-- ARGV[4..]   per window: span (buckets a window, 1..1000); lateness, in
--             buckets (0..4000); threshold; how long the hash lives
--             after its last change, seconds
-- then        per change: window index (1..n), offset, event id (8 bytes),
--             bucket, amount: positive for an order, '-' and the amount
--             for a refund
--
-- Reply: two integers per change, in order:
--   {value, 1}   an order that took the value from below the threshold to
--                at or above it (again for its redeliveries)
--   {value, 0}   counted, or counted before (a redelivery)
--   {value, 2}   late: its bucket is older than the group's newest bucket
--                minus span minus lateness; not counted, nothing written
--   {value, 3}   a refund larger than what its window held, which is now 0
--   {-1, -1}     its arguments are unusable; nothing written for it
-- A single {-1, -1}: the call's own arguments are unusable.
--
-- An order out of order (an older bucket than the group's newest) is judged
-- by every window it falls into: it crossed when the largest of them went
-- from below the threshold to at or above it. A refund subtracts from the
-- buckets of its window, newest first, and never below zero; a group with
-- nothing counted ignores it ({0, 0}).
--
-- Redeliveries are known as incr_and_check knows them: by the last offset
-- of their partition and the latest event ids. Buckets older than two
-- spans and the lateness behind the newest are removed, so that a group
-- holds at most 2 * span + lateness + 1 buckets.
local LATEST = 4
-- Bounds keep a group's buckets (2 * span + lateness) few enough for one
-- HDEL of them all.
local MAX_WINDOWS, MAX_CHANGES, MAX_SPAN, MAX_LATE = 64, 512, 1000, 4000
local BIG = 9007199254740992 -- 2^53: a bucket saturates here, above any threshold
local call, tonumber, match, find, sub, format = redis.call, tonumber, string.match, string.find, string.sub, string.format
local min, floor, unpack = math.min, math.floor, unpack
local KEYS, ARGV = KEYS, ARGV

-- Straight-line code, as incr_and_check: Redis runs a script's chunk anew
-- at every call, so each local function would be a closure made again, and
-- each use of one a Lua call frame (Performance). Numbers are digit strings
-- without leading zeros.
local DIGITS = '^[1-9]%d*$'

local src, n = ARGV[1], tonumber(ARGV[3])
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and find(src, ':', 1, true)
    and type(ARGV[3]) == 'string' and #ARGV[2] <= 10 and match(ARGV[2], DIGITS) and #ARGV[3] <= 2 and match(ARGV[3], DIGITS)
    and n <= MAX_WINDOWS and #KEYS == 2 * n) then
  return {-1, -1}
end
local first_change = 4 + 4 * n
local changes = (#ARGV - first_change + 1) / 5
if changes < 1 or changes > MAX_CHANGES or changes ~= floor(changes) then
  return {-1, -1}
end
local usable = {}
for i = 1, n do
  local a = 4 * i
  local sp, lt, th, tl = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local span = #sp <= 4 and match(sp, DIGITS) and tonumber(sp)
  usable[i] = span and span <= MAX_SPAN and #lt <= 4 and (lt == '0' or match(lt, DIGITS)) and tonumber(lt) <= MAX_LATE
      and #th <= 18 and match(th, DIGITS) and #tl <= 10 and match(tl, DIGITS) and true
end

-- Every window is read once, on its first change, and written once.
local windows = {}
local reply, r = {}, 0
for a = first_change, #ARGV, 5 do
  local i, off, id, ks, amount = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local refund = sub(amount, 1, 1) == '-'
  if refund then
    amount = sub(amount, 2)
  end
  if not (i and i >= 1 and i <= n and i == floor(i) and usable[i] and #off <= 15 and (off == '0' or match(off, DIGITS))
      and #id == 8 and #ks <= 15 and (ks == '0' or match(ks, DIGITS)) and #amount <= 18 and match(amount, DIGITS)) then
    reply[r + 1], reply[r + 2] = -1, -1
  else
    local w = windows[i]
    if not w then
      local c = 4 * i
      w = {key = KEYS[2 * i - 1], span = tonumber(ARGV[c]), late = tonumber(ARGV[c + 1]),
        threshold = tonumber(ARGV[c + 2]), ttl = ARGV[c + 3], b = {}, touched = {}, total = 0, latest = ''}
      local got = call('HGETALL', w.key)
      local b = w.b
      for j = 1, #got, 2 do
        local f, v = got[j], got[j + 1]
        if f == 'k' then
          w.newest = tonumber(v)
        elseif f == 'r' then
          w.latest = v
        elseif f == src then
          w.last = tonumber(v)
        elseif match(f, '^%d+$') then
          b[tonumber(f)] = tonumber(v)
        end
      end
      if w.newest then
        local since, total = w.newest - w.span, 0
        for k, v in pairs(b) do
          if k > since then
            total = total + v
          end
        end
        w.total = total
      end
      windows[i] = w
    end
    local o, k = tonumber(off), tonumber(ks)
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
    if not refund and (again or not w.last) then
      if w.has_marks == nil then
        w.has_marks = call('EXISTS', KEYS[2 * i]) == 1
      end
      mark = w.has_marks and call('HGET', KEYS[2 * i], id)
    end
    if mark then
      reply[r + 1], reply[r + 2] = tonumber(mark), 1
    elseif again then
      reply[r + 1], reply[r + 2] = w.total, 0
    elseif refund and not w.newest then
      reply[r + 1], reply[r + 2] = 0, 0
    elseif w.newest and k <= w.newest - w.span - w.late then
      reply[r + 1], reply[r + 2] = w.total, 2
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
        w.newest, newest = k, k
      end
      local value, flag
      local inc = tonumber(amount)
      if refund then
        -- Subtracted from the buckets of its window, newest first; nothing
        -- when the window held nothing.
        local left = inc
        for j = k, k - span + 1, -1 do
          local v = b[j]
          if v and v > 0 then
            local d = min(v, left)
            b[j] = v - d
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
        if left == 0 then
          value, flag = w.total, 0
        elseif left ~= inc then
          value, flag = w.total, 3
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
        value = before + inc
        flag = (before < w.threshold and value >= w.threshold) and 1 or 0
      end
      if value == nil then
        reply[r + 1], reply[r + 2] = 0, 0
      else
        w.last, w.dirty = o, true
        w.latest = sub(w.latest .. id, -8 * LATEST)
        if flag == 1 then
          call('HSET', KEYS[2 * i], id, format('%d', value))
          call('EXPIRE', KEYS[2 * i], ARGV[2])
          w.has_marks = true
        end
        reply[r + 1], reply[r + 2] = value, flag
      end
    end
  end
  r = r + 2
end

for _, w in pairs(windows) do
  if w.dirty then
    local oldest = w.newest - 2 * w.span - w.late
    local set = {'k', format('%d', w.newest), src, format('%d', w.last), 'r', w.latest}
    local gone = {}
    for j, v in pairs(w.b) do
      if j <= oldest or v <= 0 then
        gone[#gone + 1] = format('%d', j)
      elseif w.touched[j] then
        set[#set + 1], set[#set + 2] = format('%d', j), format('%d', v)
      end
    end
    call('HSET', w.key, unpack(set))
    if #gone > 0 then
      call('HDEL', w.key, unpack(gone))
    end
    -- A sliding window never ends while its group is active: it lives a
    -- while after its last change.
    call('EXPIRE', w.key, w.ttl)
  end
end
return reply
