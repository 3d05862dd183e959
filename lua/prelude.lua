-- prelude: what the counting scripts share, prepended to incr_and_check and
-- sales_decr (lua.go; the same text is in each script's SHA1). For now it is
-- theirs alone: slide_and_check and distinct_and_check keep their own.
--
-- A bucket's offsets (KEYS[1]) are a hash with a field per source partition
-- and script: "<last offset applied here> <ids of the latest events
-- applied>", 8 bytes an id, at most LATEST of them. A call carries one
-- partition's run of events for the bucket, and the calls of a bucket and
-- partition cover increasing, disjoint runs of offsets, so the field is read
-- once and written once a call.
local LATEST = 16
-- Locals, not globals: the bodies run for every change of every event.
local call, pcall, tonumber, match, find, sub, format = redis.call, redis.pcall, tonumber, string.match, string.find, string.sub, string.format
local KEYS, ARGV = KEYS, ARGV

local function positive(s, digits)
  return type(s) == 'string' and #s <= digits and match(s, '^[1-9]%d*$') ~= nil
end
local function offset(s)
  return type(s) == 'string' and #s <= 15 and (s == '0' or match(s, '^[1-9]%d*$') ~= nil)
end

-- applied reads the source's field of the offsets; one that does not parse
-- is taken as none.
local function applied(key, field)
  local a = {key = key, field = field, latest = ''}
  local got = call('HGET', key, field)
  if got then
    local sp = find(got, ' ', 1, true)
    if sp and offset(sub(got, 1, sp - 1)) and (#got - sp) % 8 == 0 and #got - sp <= 8 * LATEST then
      a.last, a.latest = tonumber(sub(got, 1, sp - 1)), sub(got, sp + 1)
    end
  end
  return a
end

-- seen tells whether id is among the latest ids: a match that straddles
-- two of them is not one.
local function seen(a, id)
  local at = find(a.latest, id, 1, true)
  while at do
    if at % 8 == 1 then
      return true
    end
    at = find(a.latest, id, at + 1, true)
  end
  return false
end

-- counts tells whether the change at offset o of event id counts: an
-- event's first change decides for all its windows. One at or below the
-- last offset applied, or whose id is among the latest (a producer's retry
-- at a later offset), was applied before.
local function counts(a, o, id)
  if o ~= a.cur then
    a.cur = o
    a.fresh = not ((a.last and o <= a.last) or seen(a, id))
    if a.fresh then
      a.latest = sub(a.latest .. id, -8 * LATEST)
    end
    if not a.last or o > a.last then
      a.last, a.dirty = o, true
    end
  end
  return a.fresh
end

-- write writes the field when the call applied an offset: 1 when the field
-- is new, else 0 (HSET's answer).
local function write(a)
  if not a.dirty then
    return 0
  end
  return call('HSET', a.key, a.field, format('%d', a.last) .. ' ' .. a.latest)
end
