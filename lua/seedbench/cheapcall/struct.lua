-- Experiment (a), issue 40: incr_and_check (prelude included) with its
-- numbers packed into one binary string a call, which Redis's struct
-- library unpacks in C: the form of every number is the packing's, so only
-- values are checked, once a call for the string's length and a few
-- comparisons a change. KEYS are today's (lua/incr_and_check.lua), and so
-- is the reply.
--
-- ARGV[1]  the source partition's name, 1 to 32 bytes
-- ARGV[2]  little-endian: how long crossing marks live, seconds (uint32);
--          n, the number of windows (uint8); per window its length, seconds
--          (uint32), and its threshold (int64); then per event and window:
--          window index (uint8, 1..n), offset (int64), event id (8 bytes),
--          increment (int64)
--
-- A change's event id is read only where it is needed (a crossing, a
-- redelivery): most changes make no string.
--
-- Numbers are Lua's doubles once unpacked: a threshold or an increment
-- must be below 2^53 (a caller sends a call of larger ones to today's
-- script, which takes them as digits).
local call, pcall, tonumber, sub, format, unpack = redis.call, redis.pcall, tonumber, string.sub, string.format, struct.unpack
local KEYS, ARGV = KEYS, ARGV
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO53, TWO62 = 9007199254740992, 4611686018427387904

local src, packed = ARGV[1], ARGV[2]
if not (#ARGV == 2 and #src >= 1 and #src <= 32 and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = unpack('<I4B', packed)
local changes = (#packed - 5 - 12 * n) / 25
if not (life >= 1 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 2 * n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
local thresholds, lengths, longest = {}, {}, life
for i = 1, n do
  local length, threshold
  length, threshold, pos = unpack('<I4i8', packed, pos)
  length = length >= 1 and length
  threshold = threshold >= 1 and threshold < TWO53 and threshold
  thresholds[i], lengths[i] = length and threshold, length
  if length and threshold and length > longest then
    longest = length
  end
end

-- The offsets' field: a number, or none; a value of another type goes.
local field = 'c:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
  last = nil
else
  last = tonumber(last)
end
local dirty, refresh = false, false

local reply, r, values = {}, 0, {}
for _ = 1, changes do
  local i, o, by, at
  at = pos
  i, o, by, pos = unpack('<Bi8xxxxxxxxi8', packed, pos)
  local t = i >= 1 and i <= n and o >= 0 and o < 1e15 and by >= 1 and by < TWO53 and thresholds[i]
  local v, first = -1, -1
  if t then
    local key = KEYS[2 * i]
    local fresh = not last or o > last
    if fresh then
      last, dirty = o, true
    else
      fresh = dirty and o == last
    end
    if fresh then
      v = pcall('INCRBY', key, by == 1 and '1' or by) -- a number Redis must format: an increment of 1 is not
      if type(v) == 'number' then
        first = 0
        if v == by or v >= t then
          if call('TTL', key) == -1 then
            if v ~= by then
              call('SET', key, by, 'EX', lengths[i])
              v = by
            else
              call('EXPIRE', key, lengths[i])
            end
            refresh = true
          end
          if v >= t then
            local exact
            if v < TWO53 then
              first = (v - by < t) and 1 or 0
            else
              exact = call('GET', key)
              local function parts(s)
                if #s <= 9 then
                  return 0, tonumber(s)
                end
                return tonumber(sub(s, 1, -10)), tonumber(sub(s, -9))
              end
              local vh, vl = parts(exact)
              local ih, il = parts(format('%d', by))
              local th, tl = parts(format('%d', t))
              local sh, sl = ih + th, il + tl
              if sl >= 1000000000 then
                sh, sl = sh + 1, sl - 1000000000
              end
              first = (vh < sh or (vh == sh and vl < sl)) and 1 or 0
            end
            if v >= TWO62 then
              call('SET', key, '4611686018427387904', 'KEEPTTL')
              v = TWO62
            end
            if first == 1 then
              local marks, marked, id = KEYS[2 * i + 1], exact or format('%d', v), sub(packed, at + 9, at + 16)
              local set = pcall('HSET', marks, id, marked)
              if type(set) == 'table' then
                if sub(set.err, 1, 9) == 'WRONGTYPE' then
                  call('DEL', marks)
                end
                call('HSET', marks, id, marked)
              end
              call('EXPIRE', marks, life)
              refresh = true
            end
          end
        end
      else
        v, first = -1, -1
      end
    else
      -- Applied before: its mark, or the counter as it is. A call's
      -- changes come in their offsets' order, so none of them counted
      -- into the window yet: its counter is read once a call.
      local mark = tonumber(pcall('HGET', KEYS[2 * i + 1], sub(packed, at + 9, at + 16)))
      if mark then
        v, first = mark, 1
      else
        if not values[i] then
          local got = pcall('GET', key)
          values[i] = type(got) ~= 'table' and (tonumber(got) or 0) or -1
        end
        v = values[i]
        first = v == -1 and -1 or 0
      end
    end
  end
  reply[r + 1], reply[r + 2] = v, first
  r = r + 2
end

if dirty and call('HSET', KEYS[1], field, last) == 1 or refresh then
  if call('EXPIRE', KEYS[1], longest, 'GT') == 0 then
    call('EXPIRE', KEYS[1], longest, 'NX')
  end
end
return reply
