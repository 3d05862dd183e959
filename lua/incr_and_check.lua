-- incr_and_check: count a run of events, all from one Kafka partition and
-- in its order, into the fixed windows of the rules of one group, each event
-- at most once, and tell for each whether it crossed a threshold first.
--
-- KEYS[2i-1]  window i: a hash of its counter (v), the last offset counted
--             from each source partition (one field per partition, named by
--             the caller), and the ids of its latest events (r)
-- KEYS[2i]    window i's crossing marks: a hash of event id -> counter
-- ARGV[1]     the source partition's field name, 1 to 32 bytes
-- ARGV[2]     how long crossing marks live, seconds
-- ARGV[3]     n, the number of windows
-- ARGV[4..]   per window: its length, seconds; its threshold
-- then        per event and window: window index (1..n), offset, event id
--             (8 bytes), increment
--
-- Reply: two integers per event and window, in order: {current, 1} when
-- prev < threshold <= current (this event crossed first), {current, 0}
-- otherwise, {-1, -1} when its arguments or its window's are unusable:
-- then it wrote nothing, and the others still count. Call arguments that
-- are unusable (keys, source, lifetime, counts) make the reply a single
-- {-1, -1}.
--
-- An event counted before changes nothing and is answered the counter as it
-- is, and 1 if it is the event that crossed, so that its alert is handed off
-- again should the first hand-off have been lost. Kafka redelivers a
-- partition in order from its committed offset: an offset at or below the
-- last one counted from its partition was counted. A second record of the
-- same event at another offset (a producer's retry) is known by its id
-- among the window's latest ids. Crossing marks outlive the window, since a
-- redelivery may come after it.
--
-- Numbers must be digit strings without leading zeros, passed to Redis as
-- they arrived: a Lua number handed to redis.call is formatted by Redis, and
-- large values come out in exponent form, which HINCRBY and EXPIRE refuse.
-- Increments and thresholds have at most 18 digits, offsets 15 (exact in
-- Lua's doubles), durations 10.
local LATEST = 4 -- event ids a window remembers
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
-- Locals, not globals: this body runs for every change of every event.
local call, tonumber, match, find, sub, format = redis.call, tonumber, string.match, string.find, string.sub, string.format
local KEYS, ARGV = KEYS, ARGV

local function positive(s, digits)
  return type(s) == 'string' and #s <= digits and match(s, '^[1-9]%d*$') ~= nil
end
local function offset(s)
  return type(s) == 'string' and #s <= 15 and (s == '0' or match(s, '^[1-9]%d*$') ~= nil)
end

local src, n = ARGV[1], tonumber(ARGV[3])
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and positive(ARGV[2], 10)
    and positive(ARGV[3], 2) and n <= MAX_WINDOWS and #KEYS == 2 * n) then
  return {-1, -1}
end
local first_change = 4 + 2 * n
local changes = (#ARGV - first_change + 1) / 4
if changes < 1 or changes > MAX_CHANGES or changes ~= math.floor(changes) then
  return {-1, -1}
end
-- A window with an unusable length or threshold refuses its changes; the
-- other windows still count.
local usable = {}
for i = 1, n do
  usable[i] = positive(ARGV[2 + 2 * i], 10) and positive(ARGV[3 + 2 * i], 18)
end

-- Every window's state is read once, on its first change.
local windows = {}
local function window(i)
  local w = windows[i]
  if not w then
    local got = call('HMGET', KEYS[2 * i - 1], 'v', src, 'r')
    w = {i = i, v = tonumber(got[1]) or 0, new = not got[1], last = tonumber(got[2]), latest = got[3] or '',
      threshold = tonumber(ARGV[3 + 2 * i])}
    windows[i] = w
  end
  return w
end

-- seen tells whether id is among the window's latest ids, which are 8
-- bytes each: a match that straddles two of them is not one.
local function seen(w, id)
  local at = find(w.latest, id, 1, true)
  while at do
    if at % 8 == 1 then
      return true
    end
    at = find(w.latest, id, at + 1, true)
  end
  return false
end

local function crossed(w, id)
  if w.has_marks == nil then
    w.has_marks = call('EXISTS', KEYS[2 * w.i]) == 1
  end
  return w.has_marks and call('HGET', KEYS[2 * w.i], id)
end

local reply, r = {}, 0
for a = first_change, #ARGV, 4 do
  local i, off, id, inc = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  if not (i and i >= 1 and i <= n and i == math.floor(i) and usable[i] and offset(off)
      and type(id) == 'string' and #id == 8 and (inc == '1' or positive(inc, 18))) then
    reply[r + 1], reply[r + 2] = -1, -1
  else
    local w = window(i)
    local o = tonumber(off)
    -- A window that has counted nothing from this partition may still
    -- see a redelivered crossing event: its window ended, or the events
    -- after it in this window came from other partitions.
    local again = (w.last and o <= w.last) or seen(w, id)
    local mark = (again or not w.last) and crossed(w, id)
    if mark then
      reply[r + 1], reply[r + 2] = tonumber(mark), 1
    elseif again then
      reply[r + 1], reply[r + 2] = w.v, 0
    else
      local prev = w.v
      local sum = prev + tonumber(inc)
      if sum > 4611686018427387904 then
        -- Saturate at 2^62, far above any threshold (at most 2^53), rather
        -- than let HINCRBY fail on overflow, which no retry could cure.
        call('HSET', KEYS[2 * i - 1], 'v', '4611686018427387904')
        w.v = 4611686018427387904
      elseif sum >= 9007199254740992 then
        -- Past 2^53 Lua's doubles round: HINCRBY adds in int64, to the
        -- counter as this call has it so far.
        if w.changed then
          call('HSET', KEYS[2 * i - 1], 'v', format('%d', w.v))
          w.changed = false
        end
        w.v = call('HINCRBY', KEYS[2 * i - 1], 'v', inc)
      else
        w.v, w.changed = sum, true
      end
      w.last, w.dirty = o, true
      w.latest = sub(w.latest .. id, -8 * LATEST)
      local first = 0
      if prev < w.threshold and w.v >= w.threshold then
        first = 1
        call('HSET', KEYS[2 * i], id, format('%d', w.v))
        call('EXPIRE', KEYS[2 * i], ARGV[2])
        w.has_marks = true
      end
      reply[r + 1], reply[r + 2] = w.v, first
    end
  end
  r = r + 2
end

for i, w in pairs(windows) do
  if w.dirty then
    local key = KEYS[2 * i - 1]
    if w.changed then
      call('HSET', key, 'v', format('%d', w.v), src, format('%d', w.last), 'r', w.latest)
    else
      call('HSET', key, src, format('%d', w.last), 'r', w.latest)
    end
    -- A new window starts now. An existing one without a TTL (something
    -- removed it) gets its length again; a running window keeps its end:
    -- re-arming it on every event would let a steady trickle keep it open
    -- for ever.
    if w.new or call('TTL', key) == -1 then
      call('EXPIRE', key, ARGV[2 + 2 * i])
    end
  end
end
return reply
