-- evidence_add: keep the latest orders of (rule, group) windows that came
-- near their thresholds, so that the alert of a crossing can list them.
--
-- KEYS[2i-1]  window i's evidence: a string, its entry count as one byte
--             (1..20), then its entries newest first, each ending with RS
--             (\30)
-- KEYS[2i]    window i itself: the evidence lives no longer than it does
-- ARGV[1]     n, the number of windows
-- ARGV[2..]   per window: how many entries to keep, 1 to 20; how long the
--             evidence lives when the window has no TTL, seconds; '1' when
--             the window slides (each change renews its TTL), else '0'
-- then        per entry, in order: its window (1..n), its text (at most 512
--             bytes, no RS), and '1' when the reply is to hold the evidence
--             as of this entry (a crossing), else '0'
--
-- Reply: one string per entry marked '1', in order: the texts newest
-- first, this one first, each ending with RS, at least the window's keep
-- of them when there were that many (the caller takes the first keep);
-- {-1} when an argument is unusable (nothing written).
--
-- A string, not a list: Redis 7.0 keeps any list as a quicklist, about 96
-- bytes a key more than a string of the same entries (Performance, Redis
-- memory); a window writes it once a call (GET, then SET), a new one, or a
-- sliding window's at every write, with the window's remaining life (PTTL).
-- A value not of this form (written by another), of any type, is replaced.
-- Entries are not checked for repeats: a redelivered batch adds its entries
-- again, and the reader drops repeats. Straight-line code, as the counting scripts.
local call, rpcall, match, tonumber, find, sub, byte, char, concat = redis.call, redis.pcall, string.match, tonumber, string.find, string.sub, string.byte, string.char, table.concat
local DIGITS = '^[1-9]%d*$'
local RS = '\30'

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
  if not (i and i <= n and #text <= 512 and (mark == '0' or mark == '1') and not find(text, RS, 1, true)) then
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

-- Each window with entries: its evidence before the call (olds, for the
-- reply), then the call's entries newest first and as many of the old ones
-- as keep leaves room for.
local olds = {}
for i = 1, n do
  local t = texts[i]
  if t then
    local key, keep = KEYS[2 * i - 1], keeps[i]
    -- redis.pcall: GET on a value of another type raises WRONGTYPE, which would
    -- fail the batch on every retry; such a value is replaced like any other.
    local old = rpcall('GET', key)
    local have = type(old) == 'string' and byte(old, 1)
    local body = ''
    if have and have >= 1 and have <= 20 then
      body = sub(old, 2)
    else
      have = 0
    end
    olds[i] = body
    local new, count = {}, 0
    for j = #t, 1, -1 do
      count = count + 1
      new[count] = t[j]
      if count == keep then
        break
      end
    end
    local s = concat(new, RS) .. RS
    if count < keep and have > 0 then
      if count + have > keep then
        -- The old entries past keep go: cut after the (keep - count)th RS.
        local pos = 0
        for _ = 1, keep - count do
          pos = find(body, RS, pos + 1, true)
          if not pos then
            break
          end
        end
        if pos then
          body = sub(body, 1, pos)
        end
        have = keep - count
      end
      s = s .. body
      count = count + have
    end
    s = char(count) .. s
    -- A fixed window's end stays put, and so does its evidence's; a
    -- sliding one's moves with each change, and so must its evidence's.
    local left = (have == 0 or ARGV[3 * i + 1] == '1') and call('PTTL', KEYS[2 * i])
    if left and left > 0 then
      call('SET', key, s, 'PX', left)
    elseif have > 0 then
      call('SET', key, s, 'KEEPTTL')
    else
      call('SET', key, s, 'EX', ARGV[3 * i])
    end
  end
end
if not marked then
  return {}
end
local reply, seen = {}, {}
for a = first, #ARGV, 3 do
  local i = tonumber(ARGV[a])
  local k = (seen[i] or 0) + 1
  seen[i] = k
  if ARGV[a + 2] == '1' then
    local t, list = texts[i], {}
    for j = k, 1, -1 do
      list[#list + 1] = t[j]
    end
    reply[#reply + 1] = concat(list, RS) .. RS .. olds[i]
  end
end
return reply
