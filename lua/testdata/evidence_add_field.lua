-- evidence_add, a field a window (issue 40, design D2, for the side-by-side
-- bench BenchmarkEvidenceLayouts; not on the hot path; Redis >= 7.4): a
-- bucket's evidence in one hash, a field a window, each field living as
-- long as its window (HPEXPIRE), so that no key of its own is paid for a
-- window's evidence. The field is the window's key after its hash tag and
-- kind ("<rule>:<group>"): the hash's own key carries the tag.
--
-- KEYS[1]     the bucket's evidence: a hash, field -> entries as
--             evidence_add's string (RS before each, oldest first)
-- KEYS[1+i]   window i itself: its field lives no longer than it does
-- ARGV        as evidence_add's (lua/evidence.go packs them)
--
-- Reply: as evidence_add's. HSET clears a field's TTL (Redis's HEXPIRE
-- page: a field's expiration is cleared by commands that overwrite it), so
-- every write gives the field its window's remaining life again (PTTL,
-- HPEXPIRE); a window with no TTL gives it the TTL sent. On Redis 8,
-- HSETEX's KEEPTTL would save both for a field that has one. A hash of
-- another type under KEYS[1] is replaced.
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
if not (n <= MAX_WINDOWS and #KEYS == n + 1 and #ARGV == n + 1
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


local bucket = KEYS[1]
local fields = {}
for i = 1, n do
  local w = KEYS[1 + i]
  local at = find(w, '}', 1, true)
  if not at or #w < at + 4 then
    return {-1}
  end
  fields[i] = sub(w, at + 4)
end

local reply = {}
for i = 1, n do
  local add = ARGV[i + 1]
  if add ~= '' then
    local f, keep, m = fields[i], keeps[i], marks[i]
    local got = pcall('HGET', bucket, f)
    if type(got) == 'table' then
      call('DEL', bucket) -- not a hash: replaced
      got = false
    end
    local s, old = add, 0
    if type(got) == 'string' and #got <= BOUND then
      s, old = got .. add, #got
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
    call('HSET', bucket, f, s)
    local left = call('PTTL', KEYS[1 + i])
    if left > 0 then
      call('HPEXPIRE', bucket, format('%d', left), 'FIELDS', '1', f)
    else
      call('HEXPIRE', bucket, format('%d', ttls[i]), 'FIELDS', '1', f)
    end
  end
end
return reply
