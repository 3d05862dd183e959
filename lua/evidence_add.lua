-- evidence_add: keep the latest orders of (rule, group) windows that came
-- near their thresholds, so that the alert of a crossing can list them.
--
-- KEYS[2i-1]  window i's evidence: a list of entries, newest first
-- KEYS[2i]    window i itself: the evidence lives no longer than it does
-- ARGV[1]     n, the number of windows
-- ARGV[2..]   per window: how many entries to keep, 1 to 20; how long the
--             evidence lives when the window has no TTL, seconds; '1' when
--             the window slides (each change renews its TTL), else '0'
-- then        per entry, in order: its window (1..n), its text (at most 512
--             bytes), and '1' when the reply is to hold the evidence as of
--             this entry (a crossing), else '0'
--
-- Reply: one list per entry marked '1', in order, each the texts newest
-- first, this one first, at most the window's keep; {-1} when an argument
-- is unusable (nothing written).
--
-- Most windows have no crossing in a call: they cost one LPUSH and, once
-- full, one LTRIM; a new list, and a sliding window's at every write, takes
-- the window's remaining life (PTTL, PEXPIRE). Entries are not checked for
-- repeats: a redelivered batch adds its entries again, and the reader drops
-- repeats.
local call, match, tonumber = redis.call, string.match, tonumber

local n = tonumber(ARGV[1])
if not (n and n >= 1 and n <= 64 and n == math.floor(n) and #KEYS == 2 * n) then
  return {-1}
end
local first = 2 + 3 * n
local entries = (#ARGV - first + 1) / 3
if entries < 1 or entries > 4096 or entries ~= math.floor(entries) then
  return {-1}
end
for i = 1, n do
  local keep, ttl, slides = tonumber(ARGV[3 * i - 1]), ARGV[3 * i], ARGV[3 * i + 1]
  if not (keep and keep >= 1 and keep <= 20 and keep == math.floor(keep)
      and type(ttl) == 'string' and #ttl <= 10 and match(ttl, '^[1-9]%d*$')
      and (slides == '0' or slides == '1')) then
    return {-1}
  end
end
local texts, marked = {}, {}
for a = first, #ARGV, 3 do
  local i, text, mark = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2]
  if not (i and i >= 1 and i <= n and i == math.floor(i) and #text <= 512 and (mark == '0' or mark == '1')) then
    return {-1}
  end
  texts[i] = texts[i] or {}
  if mark == '1' then
    marked[i] = true
  end
end

-- Windows with a crossing: their evidence as it was, to list.
local before = {}
for i in pairs(marked) do
  before[i] = call('LRANGE', KEYS[2 * i - 1], 0, tonumber(ARGV[3 * i - 1]) - 1)
end

local reply = {}
for a = first, #ARGV, 3 do
  local i = tonumber(ARGV[a])
  local t = texts[i]
  t[#t + 1] = ARGV[a + 1]
  if ARGV[a + 2] == '1' then
    local keep, list = tonumber(ARGV[3 * i - 1]), {}
    for j = #t, math.max(#t - keep + 1, 1), -1 do
      list[#list + 1] = t[j]
    end
    local old = before[i]
    for j = 1, math.min(#old, keep - #list) do
      list[#list + 1] = old[j]
    end
    reply[#reply + 1] = list
  end
end

for i, t in pairs(texts) do
  local key, keep = KEYS[2 * i - 1], tonumber(ARGV[3 * i - 1])
  local len = call('LPUSH', key, unpack(t))
  if len > keep then
    call('LTRIM', key, 0, keep - 1)
  end
  -- A new list ends with its window. A fixed window's end stays put; a
  -- sliding one's moves with each change, and so must its list's, or the
  -- list would end while the window still counts its orders.
  local new = len == #t
  if new or ARGV[3 * i + 1] == '1' then
    local left = call('PTTL', KEYS[2 * i])
    if left > 0 then
      call('PEXPIRE', key, left)
    elseif new then
      call('EXPIRE', key, ARGV[3 * i])
    end
  end
end
return reply
