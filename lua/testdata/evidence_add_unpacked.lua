-- evidence_add before its arguments were packed (issue 40, for the side-by-side
-- bench): three arguments an entry (window, text, mark), each checked by a
-- Lua pattern. Packed (one binary string and a window's entries joined),
-- the call costs Redis less: Performance, Evidence.
--
-- evidence_add: keep the latest orders of (rule, group) windows that came
-- near their thresholds, so that the alert of a crossing can list them.
--
-- KEYS[2i-1]  window i's evidence: a string of its entries, oldest first,
--             each starting with RS (\30)
-- KEYS[2i]    window i itself: the evidence lives no longer than it does
-- ARGV[1]     n, the number of windows
-- ARGV[2..]   per window: how many entries to keep, 1 to 20; how long the
--             evidence lives when the window has no TTL, seconds; '1' when
--             the window slides (each change renews its TTL), else '0'
-- then        per entry, in order: its window (1..n), its text (at most 512
--             bytes, no RS), and '1' when the reply is to hold the evidence
--             as of this entry (a crossing), else '0'
--
-- Reply: one string per entry marked '1', in order: the window's newest
-- entries as of it, oldest first, this one last, each starting with RS, the
-- window's keep of them when there were that many (the caller reverses
-- them); {-1} when an argument is unusable (nothing written).
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
-- A value not of this form (written by another) is replaced when it is
-- read (a crossing, a trim), or at once when it is of another type or
-- longer than BOUND: it never fails the call, and no crossing lists it.
-- Entries are not checked for repeats: a redelivered batch adds its
-- entries again, and the reader drops repeats. Straight-line code, as the
-- counting scripts, but for newest.
local call, rpcall, match, tonumber, find, sub, byte, concat = redis.call, redis.pcall, string.match, tonumber, string.find, string.sub, string.byte, table.concat
local DIGITS = '^[1-9]%d*$'
local RS = '\30'
local BOUND = 2 * 20 * 513 -- the longest trim point: 2 × 20 entries of 512 bytes and their RS

local n_s = ARGV[1]
local n = type(n_s) == 'string' and #n_s <= 2 and match(n_s, DIGITS) and tonumber(n_s)
if not (n and n <= 64 and #KEYS == 2 * n) then
  return {-1}
end
local first = 2 + 3 * n
local entries = (#ARGV - first + 1) / 3
if entries < 1 or entries > 4096 or entries ~= math.floor(entries) then
  return {-1}
end
local keeps = {}
for i = 1, n do
  local ks, ttl, slides = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  local keep = #ks <= 2 and match(ks, DIGITS) and tonumber(ks)
  if not (keep and keep <= 20 and #ttl <= 10 and match(ttl, DIGITS) and (slides == '0' or slides == '1')) then
    return {-1}
  end
  keeps[i] = keep
end
-- Each window's texts, oldest first; the bytes its first k of them take
-- (ends); its longest (width); its crossings: {k, reply slot}.
local texts, ends, width, marks, marked = {}, {}, {}, {}, 0
for a = first, #ARGV, 3 do
  local is, text, mark = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local i = #is <= 2 and match(is, DIGITS) and tonumber(is)
  if not (i and i <= n and #text <= 512 and (mark == '0' or mark == '1') and not find(text, RS, 1, true)) then
    return {-1}
  end
  local t, e = texts[i], ends[i]
  if not t then
    t, e = {}, {}
    texts[i], ends[i], width[i], marks[i] = t, e, 0, {}
  end
  local k = #t + 1
  t[k] = text
  e[k] = (e[k - 1] or 0) + 1 + #text
  if #text + 1 > width[i] then
    width[i] = #text + 1
  end
  if mark == '1' then
    marked = marked + 1
    marks[i][#marks[i] + 1] = {k, marked}
  end
end

-- Where the newest keep entries of s start, or nil when s is not a string
-- of entries (its first byte not RS, or an entry longer than 512 bytes).
local function newest(s, keep)
  if byte(s, 1) ~= 30 then
    return nil
  end
  local starts, p = {}, 1
  while p do
    local q = find(s, RS, p + 1, true)
    if (q or #s + 1) - p > 513 then
      return nil
    end
    starts[#starts + 1] = p
    p = q
  end
  return starts[#starts - keep + 1] or 1
end

local reply = {}
for i = 1, n do
  local t = texts[i]
  if t then
    local key, keep, m = KEYS[2 * i - 1], keeps[i], marks[i]
    local add = RS .. concat(t, RS)
    local got = rpcall('GET', key)
    local s, old = add, 0
    if type(got) == 'string' and #got <= BOUND then
      s, old = got .. add, #got
    end
    if old > 0 and (#m > 0 or #s > 2 * keep * width[i]) and not newest(sub(s, 1, old), 1) then
      s, old = add, 0 -- not ours: replaced
    end
    for _, km in ipairs(m) do
      local upto = sub(s, 1, old + ends[i][km[1]])
      reply[km[2]] = sub(upto, newest(upto, keep))
    end
    if #s > 2 * keep * width[i] then
      s = sub(s, newest(s, keep))
    end
    local left = (old == 0 or ARGV[3 * i + 1] == '1') and call('PTTL', KEYS[2 * i])
    if left and left > 0 then
      call('SET', key, s, 'PX', left)
    elseif old == 0 then
      call('SET', key, s, 'EX', ARGV[3 * i])
    else
      call('SET', key, s, 'KEEPTTL')
    end
  end
end
return reply
