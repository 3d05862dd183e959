-- prelude: what the counting scripts share, prepended to incr_and_check and
-- sales_decr (lua.go; the same text is in each script's SHA1). For now it is
-- theirs alone: slide_and_check and distinct_and_check keep their own.
--
-- A bucket's offsets (KEYS[1]) are a hash with a field per source partition
-- and script: the last offset applied here from it. A call carries one
-- partition's run of events for the bucket, and the calls of a bucket and
-- partition cover increasing, disjoint runs of offsets, so the field is read
-- once and written once a call. A producer's retry (the same event at a
-- later offset) is the consumer's to catch, before any script (README,
-- Delivery guarantees).
-- Locals, not globals: the bodies run for every change of every event.
local call, pcall, tonumber, match, sub, format = redis.call, redis.pcall, tonumber, string.match, string.sub, string.format
local KEYS, ARGV = KEYS, ARGV

-- ARGV's elements are strings: within #ARGV, no type check is needed.
local function positive(s, digits)
  return s ~= nil and #s <= digits and match(s, '^[1-9]%d*$') ~= nil
end
local function offset(s)
  return s ~= nil and #s <= 15 and (s == '0' or match(s, '^[1-9]%d*$') ~= nil)
end

-- number is positive(s, digits) and s's value, or false. A call repeats
-- the same few strings (its windows' lengths and thresholds, their
-- indices), and tonumber costs a tenth of an INCRBY: each is parsed once.
local parsed = {}
local function number(s, digits)
  if s == nil then
    return false
  end
  local v = parsed[s]
  if v == nil then
    v = positive(s, 19) and tonumber(s)
    parsed[s] = v
  end
  return v and #s <= digits and v
end

-- applied reads the source's field of the offsets; one that does not parse
-- is taken as none.
local function applied(key, field)
  local a = {key = key, field = field}
  local got = call('HGET', key, field)
  if got and offset(got) then
    a.last = tonumber(got)
  end
  return a
end

-- counts tells whether the change at offset o counts: one at or below the
-- last offset applied was applied before, to every window of the bucket,
-- in the call that applied it. An event's changes share its offset.
local function counts(a, o)
  if not a.last or o > a.last then
    a.last, a.dirty = o, true
    return true
  end
  return a.dirty and o == a.last
end

-- write writes the field when the call applied an offset: 1 when the field
-- is new, else 0 (HSET's answer).
local function write(a)
  if not a.dirty then
    return 0
  end
  return call('HSET', a.key, a.field, format('%d', a.last))
end
