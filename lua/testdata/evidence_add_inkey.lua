-- evidence_add, in the window's own key (issue 40, design D1, for the
-- side-by-side bench BenchmarkEvidenceLayouts; not on the hot path): a fixed
-- window that keeps evidence holds it in its counter's string, after the
-- count: "<count>" RS entry RS entry ... (each entry starting with RS), so
-- that no key of its own (its name, object, key-table and expiry entries,
-- about 100 bytes in Redis 7.0) is paid for it. The count stays a plain
-- string until its window first keeps evidence; incr_and_check_inkey.lua
-- counts both forms. A string, not a hash {count, evidence}: Redis keeps a
-- hash as a listpack only while every value is at most
-- hash-max-listpack-value (64) bytes, and most near-threshold windows hold
-- more (Performance, Redis memory).
--
-- KEYS[i]     window i: its counter (a string, its TTL its end)
-- ARGV        as evidence_add's (lua/evidence.go packs them); a sliding
--             window is refused (its window is a hash: not this design's)
--
-- Reply: as evidence_add's. The window's TTL is never touched (SET
-- KEEPTTL): the evidence ends with its window. A window that is gone, or
-- whose count is not digits (written by another), keeps no evidence; a
-- crossing still lists the call's own entries.
local find, byte = string.find, string.byte
local RS = '\30'
local BOUND = 2 * 20 * 513 -- the longest trim point: 2 × 20 entries of 512 bytes and their RS
local MAX_WINDOWS, MAX_ENTRIES = 64, 4096

local head = ARGV[1]
if not (type(head) == 'string' and #head >= 1) then
  return {-1}
end
local n, pos = decode('<B', head)
local marked = (#head - 1 - 8 * n) / 3
if not (n <= MAX_WINDOWS and #KEYS == n and #ARGV == n + 1
    and marked >= 0 and marked % 1 == 0) then
  return {-1}
end
-- Per window: its keep, TTL, sliding flag and entry count; its longest
-- entry with its RS (width).
local keeps, ttls, slides, counts, width, total = {}, {}, {}, {}, {}, 0
for i = 1, n do
  local keep, ttl, slide, count
  keep, ttl, slide, count, pos = decode('<BI4BH', head, pos)
  local s = ARGV[i + 1]
  total = total + count
  if not (keep >= 1 and keep <= 20 and ttl >= 1 and slide <= 1 and total <= MAX_ENTRIES
      and (count > 0 and byte(s, 1) == 30 or count == 0 and s == '')) then
    return {-1}
  end
  -- Exactly count entries, each at most 512 bytes: the last with no RS
  -- after it.
  local w, p = 0, 1
  for k = 1, count do
    local q = find(s, RS, p + 1, true)
    local e = (q or #s + 1) - p
    if e > 513 or (q == nil) ~= (k == count) then
      return {-1}
    end
    p = q
    if e > w then
      w = e
    end
  end
  keeps[i], ttls[i], slides[i], counts[i], width[i] = keep, ttl, slide, count, w
end
if total < 1 then
  return {-1}
end
-- The crossings of each window, {k, reply slot}: each an entry of it, each
-- after the one before, as the entries were marked (so at most one an
-- entry).
local marks = {}
for i = 1, n do
  marks[i] = {}
end
for m = 1, marked do
  local i, k
  i, k, pos = decode('<BH', head, pos)
  local mi = marks[i] -- none past 1..n
  local last = mi and mi[#mi]
  if not (mi and k > (last and last[1] or 0) and k <= counts[i]) then
    return {-1}
  end
  mi[#mi + 1] = {k, m}
end

-- Where the newest keep entries of s start, or nil when s is not a string
-- of entries (its first byte not RS, or an entry longer than 512 bytes).
local function newest(s, keep)
  if byte(s, 1) ~= 30 then
    return nil
  end
  local at, p = {}, 1
  while p do
    local q = find(s, RS, p + 1, true)
    if (q or #s + 1) - p > 513 then
      return nil
    end
    at[#at + 1] = p
    p = q
  end
  return at[#at - keep + 1] or 1
end


for i = 1, n do
  if slides[i] == 1 then
    return {-1}
  end
end

local reply = {}
for i = 1, n do
  local add = ARGV[i + 1]
  if add ~= '' then
    local key, keep, m = KEYS[i], keeps[i], marks[i]
    local got = pcall('GET', key)
    local count, s, old = nil, add, 0
    if type(got) == 'string' then
      local at = find(got, RS, 1, true)
      count = at and sub(got, 1, at - 1) or got
      if not (count == '0' or match(count, DIGITS)) then
        count = nil
      elseif at and #got - at < BOUND then
        s, old = sub(got, at) .. add, #got - at + 1
      end
    end
    if old > 0 and (#m > 0 or #s > 2 * keep * width[i]) and not newest(sub(s, 1, old), 1) then
      s, old = add, 0 -- not ours: replaced
    end
    for _, km in ipairs(m) do
      local after = 1
      for _ = 1, km[1] do
        after = find(add, RS, after + 1, true)
      end
      local upto = sub(s, 1, old + (after and after - 1 or #add))
      reply[km[2]] = sub(upto, newest(upto, keep))
    end
    if #s > 2 * keep * width[i] then
      s = sub(s, newest(s, keep))
    end
    if count then
      call('SET', key, count .. s, 'KEEPTTL')
    end
  end
end
return reply
