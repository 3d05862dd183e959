-- incr_and_check: count a run of events, all from one Kafka partition and
-- in its order, into the fixed windows of the rules of one bucket of groups,
-- each event at most once, and tell for each whether it crossed a threshold
-- first.
--
-- KEYS[1]     the bucket's offsets: a hash with a field per source partition
--             and script, the last offset applied here from it
-- KEYS[2i]    window i: its counter, a string; its TTL is its end
-- KEYS[2i+1]  window i's crossing marks: a hash of event id -> counter
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     how long crossing marks live, seconds
-- ARGV[3]     n, the number of windows
-- ARGV[4..]   per window: its length, seconds; its threshold
-- then        per event and window: window index (1..n), offset, event id
--             (8 bytes), increment
--
-- Reply: two integers per event and window, in order: {current, 1} when
-- prev < threshold <= current (this event crossed first), {current, 0}
-- otherwise, {-1, -1} when its arguments or its window are unusable: then it
-- wrote nothing to the window, and the others still count. Call arguments
-- that are unusable (keys, source, lifetime, counts) make the reply a single
-- {-1, -1}.
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
-- Numbers must be digit strings without leading zeros, passed to Redis as
-- they arrived: a Lua number handed to redis.call is formatted by Redis, and
-- large values come out in exponent form, which INCRBY and EXPIRE refuse.
-- Increments and thresholds have at most 18 digits, offsets 15 (exact in
-- Lua's doubles), durations 10.
--
-- It runs after prelude.lua, which it shares with sales_decr.
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO53, TWO62 = 9007199254740992, 4611686018427387904

local src, n = ARGV[1], tonumber(ARGV[3])
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and positive(ARGV[2], 10)
    and positive(ARGV[3], 2) and n <= MAX_WINDOWS and #KEYS == 2 * n + 1) then
  return {-1, -1}
end
local first_change = 4 + 2 * n
local changes = (#ARGV - first_change + 1) / 4
if changes < 1 or changes > MAX_CHANGES or changes ~= math.floor(changes) then
  return {-1, -1}
end
-- A window with an unusable length or threshold (thresholds[i] false)
-- refuses its changes; the other windows still count. The offsets live as
-- long as the marks or the longest window, whichever is longer.
local thresholds, life, longest = {}, ARGV[2], tonumber(ARGV[2])
for i = 1, n do
  local length = number(ARGV[2 + 2 * i], 10)
  thresholds[i] = length and number(ARGV[3 + 2 * i], 18)
  if thresholds[i] and length > longest then
    life, longest = ARGV[2 + 2 * i], length
  end
end

local a = applied(KEYS[1], 'c:' .. src)

-- below tells whether v - inc < t exactly, for digit strings of at most 19
-- digits, in two parts that Lua's doubles hold exactly: the last 9 digits
-- and the rest.
local function parts(s)
  if #s <= 9 then
    return 0, tonumber(s)
  end
  return tonumber(sub(s, 1, -10)), tonumber(sub(s, -9))
end
local function below(v, inc, t)
  local vh, vl = parts(v)
  local ih, il = parts(inc)
  local th, tl = parts(t)
  local sh, sl = ih + th, il + tl
  if sl >= 1000000000 then
    sh, sl = sh + 1, sl - 1000000000
  end
  return vh < sh or (vh == sh and vl < sl)
end

-- over is the rest of a change that INCRBY answered v, when v is the
-- increment (a new window) or at the threshold: then the window may need
-- its length, and the change may have crossed. It answers the counter and
-- whether this change crossed. refresh is set when a window or a mark got
-- a lifetime: the offsets must outlive it.
local values, refresh = {}, false
local function arm(key, length)
  -- A window gets its length when it reads -1, which only a new window or
  -- one something made persistent can: the latter is caught when it
  -- reaches its threshold. A running TTL is never reset, so a steady
  -- trickle cannot keep a window open for ever.
  if call('TTL', key) == -1 then
    call('EXPIRE', key, length)
    refresh = true
  end
end
local function over(i, id, inc, v, by)
  local key, t = KEYS[2 * i], thresholds[i]
  if v == by or v >= t then
    arm(key, ARGV[2 + 2 * i])
  end
  if v < t then
    return v, 0
  end
  local first, exact = 0, nil
  -- Past 2^53 Lua's doubles round: the counter is read as digits.
  if v < TWO53 then
    first = (v - by < t) and 1 or 0
  else
    exact = call('GET', key)
    first = below(exact, inc, ARGV[3 + 2 * i]) and 1 or 0
  end
  if v >= TWO62 then
    -- Saturate at 2^62, far above any threshold (below 2^53), so that
    -- INCRBY never fails on overflow, which no retry could cure.
    call('SET', key, '4611686018427387904', 'KEEPTTL')
    v = TWO62
  end
  if first == 1 then
    call('HSET', KEYS[2 * i + 1], id, exact or format('%d', v))
    call('EXPIRE', KEYS[2 * i + 1], ARGV[2])
    refresh = true
  end
  return v, first
end

-- again answers a change applied before: its mark, or the counter; nil
-- when the window's key holds no string.
local function again(i, id)
  local mark = tonumber(call('HGET', KEYS[2 * i + 1], id))
  if mark then
    return mark, 1
  end
  if not values[i] then
    local got = pcall('GET', KEYS[2 * i])
    if type(got) == 'table' then
      return nil
    end
    values[i] = tonumber(got) or 0
  end
  return values[i], 0
end

-- The loop runs for every change: what most changes need is inline, and
-- each costs as few Lua operations as it can (README, Performance).
local reply, r = {}, 0
for c = first_change, #ARGV, 4 do
  local i, off, id, inc = number(ARGV[c], 2), ARGV[c + 1], ARGV[c + 2], ARGV[c + 3]
  local v, first = -1, -1
  if i and thresholds[i] and offset(off) and #id == 8 and (inc == '1' or positive(inc, 18)) then
    if counts(a, tonumber(off)) then
      v = pcall('INCRBY', KEYS[2 * i], inc)
      if type(v) == 'number' then
        local by = inc == '1' and 1 or tonumber(inc)
        first = 0
        if v == by or v >= thresholds[i] then
          v, first = over(i, id, inc, v, by)
        end
        values[i] = v
      else
        v = nil
      end
    else
      v, first = again(i, id)
    end
    if not v then
      v, first = -1, -1
    end
  end
  reply[r + 1], reply[r + 2] = v, first
  r = r + 2
end

-- The offsets get their lifetime when a window or a mark got one, or when
-- the field is new: they then outlive every window and mark of the bucket.
-- A call that only adds to running windows leaves it as it is.
if write(a) == 1 or refresh then
  call('EXPIRE', KEYS[1], life)
end
return reply
