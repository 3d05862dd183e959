-- evidence_add: keep the latest orders of (rule, group) windows that came
-- near their thresholds, so that the alert of a crossing can list them.
--
-- KEYS[2i-1]  window i's evidence: a string of its entries, oldest first,
--             each starting with RS (\30)
-- KEYS[2i]    window i itself: the evidence lives no longer than it does
-- ARGV[1]     the call's numbers, packed little-endian (lua/evidence.go),
--             unpacked by Redis's struct library in C (prelude.lua): n, the
--             number of windows (uint8, 1..64); per window how many entries
--             to keep (uint8, 1..20), how long the evidence lives when the
--             window has no TTL, seconds (uint32, >= 1), 1 when the window
--             slides (each change renews its TTL) else 0 (uint8), and how
--             many entries it gets (uint16); then per entry marked as a
--             crossing, in order: its window (uint8, 1..n) and its place
--             among that window's entries (uint16, from 1, past the
--             window's mark before it). 1 + 8 n + 3 a mark bytes.
-- ARGV[1+i]   window i's entries, oldest first, joined: each starts with
--             RS and holds at most 512 bytes, none of them RS; '' for a
--             window that gets none. 1 to 4096 entries in all.
--
-- Reply: one string per entry marked, in order: the window's newest
-- entries as of it, oldest first, this one last, each starting with RS, the
-- window's keep of them when there were that many (the caller reverses
-- them); {-1} when an argument is unusable (nothing written).
--
-- A window's entries come joined, so that they cost the call one argument,
-- written by go-redis and checked here with one find an entry in C, rather
-- than three, each matched by a Lua pattern (Performance, Evidence); the
-- check (its first byte RS, exactly the count's entries, none longer than
-- 512 bytes) is what newest does to a stored value.
--
-- A window's evidence is read (GET) and written whole (SET) once a call:
-- APPEND would save the read and the rewrite, about a quarter of the
-- call's time side by side, but Redis gives an appended string room to
-- double, which cost more Redis memory than the time was worth in make
-- bench (Performance, Evidence; lua/testdata/evidence_add_append.lua). The
-- string is trimmed lazily, to its newest keep entries, when it grows past
-- 2 × keep entries of the call's longest, so that it never holds more than
-- BOUND bytes before a call. A new one takes the window's remaining life
-- (PTTL), or the TTL sent without one; a sliding window's evidence takes
-- the window's remaining life at every write; otherwise KEEPTTL. A string,
-- not a list: Redis 7.0 keeps any list as a quicklist, about 96 bytes a key
-- more (Performance, Redis memory).
--
-- Sliding and distinct windows keep their evidence here; a fixed count or
-- amount window's counting call keeps its own, in its hash
-- (incr_and_check), and the Go side never names one here.
--
-- A value not of this form (written by another) is replaced when it is
-- read (a crossing, a trim), or at once when it is of another type or
-- longer than BOUND: it never fails the call, and no crossing lists it.
-- Entries are not checked for repeats: a redelivered batch adds its
-- entries again, and the reader drops repeats. Straight-line code, as the
-- counting scripts, but for newest. It runs after prelude.lua (decode).
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
if not (n <= MAX_WINDOWS and #KEYS == 2 * n and #ARGV == n + 1
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

local reply = {}
for i = 1, n do
  local add = ARGV[i + 1]
  if add ~= '' then
    local key, keep, m = KEYS[2 * i - 1], keeps[i], marks[i]
    local got = pcall('GET', key)
    local s, old = add, 0
    if type(got) == 'string' and #got <= BOUND then
      s, old = got .. add, #got
    end
    if old > 0 and (#m > 0 or #s > 2 * keep * width[i]) and not newest(sub(s, 1, old), 1) then
      s, old = add, 0 -- not ours: replaced
    end
    for _, km in ipairs(m) do
      -- Where the entry after the crossing starts, if any: crossings are
      -- rare, so their entries are found again rather than kept.
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
    local left = (old == 0 or slides[i] == 1) and call('PTTL', KEYS[2 * i])
    if left and left > 0 then
      call('SET', key, s, 'PX', left)
    elseif old == 0 then
      call('SET', key, s, 'EX', format('%d', ttls[i]))
    else
      call('SET', key, s, 'KEEPTTL')
    end
  end
end
return reply
