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
-- repeats. Straight-line code, as the counting scripts: no function is
-- made per call, and a call without a crossing builds no reply.
local call, match, tonumber, unpack = redis.call, string.match, tonumber, unpack
local DIGITS = '^[1-9]%d*$'

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
-- Each window's texts, oldest first, and whether any entry is a crossing.
local texts, marked = {}, false
for a = first, #ARGV, 3 do
  local is, text, mark = ARGV[a], ARGV[a + 1], ARGV[a + 2]
  local i = #is <= 2 and match(is, DIGITS) and tonumber(is)
  if not (i and i <= n and #text <= 512 and (mark == '0' or mark == '1')) then
    return {-1}
  end
  local t = texts[i]
  if t then
    t[#t + 1] = text
  else
    texts[i] = {text}
  end
  if mark == '1' then
    marked = true
  end
end

local reply = {}
if marked then
  -- A crossing's list: this call's texts of its window up to it, newest
  -- first, then the list as it was before the call.
  local before, seen = {}, {}
  for a = first, #ARGV, 3 do
    local i = tonumber(ARGV[a])
    local k = (seen[i] or 0) + 1
    seen[i] = k
    if ARGV[a + 2] == '1' then
      local keep, t, list = keeps[i], texts[i], {}
      for j = k, math.max(k - keep + 1, 1), -1 do
        list[#list + 1] = t[j]
      end
      if #list < keep then
        local old = before[i]
        if not old then
          old = call('LRANGE', KEYS[2 * i - 1], 0, keep - 1)
          before[i] = old
        end
        for j = 1, math.min(#old, keep - #list) do
          list[#list + 1] = old[j]
        end
      end
      reply[#reply + 1] = list
    end
  end
end

for i = 1, n do
  local t = texts[i]
  if t then
    local key, keep = KEYS[2 * i - 1], keeps[i]
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
end
return reply
