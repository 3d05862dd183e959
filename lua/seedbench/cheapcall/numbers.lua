-- Experiment (c), issue 40: incr_and_check (prelude included) with its
-- arguments checked by tonumber and ranges rather than a Lua pattern each.
-- On the path a change commonly takes, an increment and an offset go to
-- Redis as they came, a string: a number handed to redis.call is
-- formatted by Redis (snprintf) at every call, which costs more than the
-- pattern did. INCRBY checks an increment's form itself, in C (one that
-- Lua read but Redis does not, "1.0", refuses its change); an offset's
-- form does not matter, since every reader takes its value (tonumber).
-- The rare paths (a new window, a crossing) pass numbers. The arguments,
-- the keys and the reply are today's (lua/incr_and_check.lua); an
-- increment or a threshold of 2^53 or more still has its digits checked.
local call, pcall, tonumber, match, sub, format = redis.call, redis.pcall, tonumber, string.match, string.sub, string.format
local KEYS, ARGV = KEYS, ARGV
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO53, TWO62 = 9007199254740992, 4611686018427387904

local src, life, n = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not (#src >= 1 and #src <= 32 and life and life % 1 == 0 and life >= 1 and life < 1e10
    and n and n % 1 == 0 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 2 * n + 1) then
  return {-1, -1}
end
local first_change = 4 + 2 * n
local changes = (#ARGV - first_change + 1) / 4
if changes < 1 or changes > MAX_CHANGES or changes % 1 ~= 0 then
  return {-1, -1}
end
-- A window's length and threshold: whole numbers, lengths below 10^10 s;
-- a threshold of 2^53 or more must be digits (it is compared exactly).
local thresholds, lengths, longest = {}, {}, life
local ls_seen, length, ts_seen, threshold
for i = 1, n do
  local ls, ts = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  if ls ~= ls_seen then
    length = tonumber(ls)
    ls_seen, length = ls, length and length % 1 == 0 and length >= 1 and length < 1e10 and length
  end
  if ts ~= ts_seen then
    threshold = tonumber(ts)
    ts_seen, threshold = ts, threshold and threshold % 1 == 0 and threshold >= 1
      and (threshold < TWO53 or (#ts <= 18 and match(ts, '^[1-9]%d*$'))) and threshold
  end
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
local dirty, refresh, last_s = false, false, nil

local reply, r, values = {}, 0, {}
local is_seen, i, off_seen, o
for c = first_change, #ARGV, 4 do
  local is, off, id, inc = ARGV[c], ARGV[c + 1], ARGV[c + 2], ARGV[c + 3]
  if is ~= is_seen then
    i = tonumber(is)
    is_seen, i = is, i and i % 1 == 0 and i >= 1 and i <= n and i
  end
  if off ~= off_seen then
    o = tonumber(off)
    off_seen, o = off, o and o % 1 == 0 and o >= 0 and o < 1e15 and o
  end
  local t = i and thresholds[i]
  local v, first = -1, -1
  local by = inc == '1' and 1 or tonumber(inc)
  if by and (by % 1 ~= 0 or by < 1 or (by >= TWO53 and not (#inc <= 18 and match(inc, '^[1-9]%d*$')))) then
    by = nil
  end
  if t and o and by and #id == 8 then
    local key = KEYS[2 * i]
    local fresh = not last or o > last
    if fresh then
      last, last_s, dirty = o, off, true
    else
      fresh = dirty and o == last
    end
    if fresh then
      v = pcall('INCRBY', key, inc)
      if type(v) == 'number' then
        first = 0
        if v == by or v >= t then
          if call('TTL', key) == -1 then
            if v ~= by then
              call('SET', key, by < TWO53 and by or inc, 'EX', lengths[i])
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
              local ih, il = parts(by < TWO53 and format('%d', by) or inc)
              local th, tl = parts(t < TWO53 and format('%d', t) or ARGV[3 + 2 * i])
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

if dirty and call('HSET', KEYS[1], field, last_s) == 1 or refresh then
  if call('EXPIRE', KEYS[1], longest, 'GT') == 0 then
    call('EXPIRE', KEYS[1], longest, 'NX')
  end
end
return reply
