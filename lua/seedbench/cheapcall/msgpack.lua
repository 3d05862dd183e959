-- Experiment (b), issue 40: incr_and_check (prelude included) with its
-- arguments packed by MessagePack into one string a call, which Redis's
-- cmsgpack library decodes in C into one table; each value's type and
-- wholeness are still checked, in Lua. KEYS are today's
-- (lua/incr_and_check.lua), and so is the reply.
--
-- ARGV[1]  the source partition's name, 1 to 32 bytes
-- ARGV[2]  a MessagePack array: how long crossing marks live, seconds; n,
--          the number of windows; per window its length, seconds, and its
--          threshold; then per event and window: window index (1..n),
--          offset, event id (8 bytes, raw), increment
--
-- Numbers are Lua's doubles once decoded: a threshold or an increment
-- must be below 2^53 (a caller sends a call of larger ones to today's
-- script, which takes them as digits).
local try = pcall -- Lua's own, before pcall is Redis's
local call, pcall, tonumber, sub, format, type = redis.call, redis.pcall, tonumber, string.sub, string.format, type
local KEYS, ARGV = KEYS, ARGV
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO53, TWO62 = 9007199254740992, 4611686018427387904

local src = ARGV[1]
local ok, args = try(cmsgpack.unpack, ARGV[2] or '')
if not (ok and #ARGV == 2 and #src >= 1 and #src <= 32 and type(args) == 'table') then
  return {-1, -1}
end
local life, n = args[1], args[2]
if not (type(life) == 'number' and type(n) == 'number') then
  return {-1, -1}
end
local changes = (#args - 2 - 2 * n) / 4
if not (life % 1 == 0 and life >= 1 and life < 1e10 and n % 1 == 0 and n >= 1 and n <= MAX_WINDOWS
    and #KEYS == 2 * n + 1 and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0) then
  return {-1, -1}
end
local thresholds, lengths, longest = {}, {}, life
for i = 1, n do
  local length, threshold = args[1 + 2 * i], args[2 + 2 * i]
  length = type(length) == 'number' and length % 1 == 0 and length >= 1 and length < 1e10 and length
  threshold = type(threshold) == 'number' and threshold % 1 == 0 and threshold >= 1 and threshold < TWO53 and threshold
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
for c = 3 + 2 * n, #args, 4 do
  local i, o, id, by = args[c], args[c + 1], args[c + 2], args[c + 3]
  local t = type(i) == 'number' and type(o) == 'number' and type(by) == 'number' and type(id) == 'string'
    and #id == 8 and i % 1 == 0 and o % 1 == 0 and by % 1 == 0
    and i >= 1 and i <= n and o >= 0 and o < 1e15 and by >= 1 and by < TWO53 and thresholds[i]
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
      v = pcall('INCRBY', key, by)
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
              local marks, marked = KEYS[2 * i + 1], exact or format('%d', v)
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
        values[i] = v
      else
        v, first = -1, -1
      end
    else
      local mark = tonumber(pcall('HGET', KEYS[2 * i + 1], id))
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
