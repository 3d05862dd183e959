-- sales_decr: subtract a run of refunds, all from one Kafka partition and in
-- its order, from the amount windows of the rules of one group, each refund
-- at most once, without touching a window's end and without going below
-- zero.
--
-- KEYS[i]     amount window i, as incr_and_check keeps it
-- ARGV[1]     the source partition's field name, 1 to 32 bytes
-- ARGV[2..]   per refund and window: window index (1..#KEYS), offset, event
--             id (8 bytes), amount
--
-- Reply: two integers per refund and window, in order:
--   {remaining, 0}  the window lowered by the amount
--   {0, 1}          the refund was larger than the window: clamped at 0
--   {0, 0}          no window (it ended, or nothing was counted); nothing
--                   written
--   {-1, -1}        its arguments are unusable; it wrote nothing, and the
--                   others still count
-- A single {-1, -1}: the call's own arguments are unusable.
--
-- A refund applied before changes nothing and is answered {current, 0}; see
-- incr_and_check for how a window knows. The second element exists so that
-- the caller can count clamps: a bare 0 cannot tell a full refund from an
-- oversized one.
local LATEST, MAX_CHANGES = 4, 4096
local call, tonumber, match, find, sub, format = redis.call, tonumber, string.match, string.find, string.sub, string.format

local function positive(s, digits)
  return type(s) == 'string' and #s <= digits and match(s, '^[1-9]%d*$') ~= nil
end
local function offset(s)
  return type(s) == 'string' and #s <= 15 and (s == '0' or match(s, '^[1-9]%d*$') ~= nil)
end

local src, n = ARGV[1], #KEYS
local changes = (#ARGV - 1) / 4
if not (type(src) == 'string' and #src >= 1 and #src <= 32 and n >= 1 and n <= 64)
    or changes < 1 or changes > MAX_CHANGES or changes ~= math.floor(changes) then
  return {-1, -1}
end

local windows = {}
local function window(i)
  local w = windows[i]
  if not w then
    local got = call('HMGET', KEYS[i], 'v', src, 'r')
    w = {key = KEYS[i], v = tonumber(got[1]), last = tonumber(got[2]), latest = got[3] or ''}
    windows[i] = w
  end
  return w
end

-- seen tells whether id is among the window's latest ids (see
-- incr_and_check).
local function seen(w, id)
  local at = find(w.latest, id, 1, true)
  while at do
    if at % 8 == 1 then
      return true
    end
    at = find(w.latest, id, at + 1, true)
  end
  return false
end

local reply = {}
for c = 0, changes - 1 do
  local a = 2 + 4 * c
  local i, off, id, amount = tonumber(ARGV[a]), ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  if not (i and i >= 1 and i <= n and i == math.floor(i) and offset(off)
      and type(id) == 'string' and #id == 8 and positive(amount, 18)) then
    reply[#reply + 1], reply[#reply + 2] = -1, -1
  else
    local w = window(i)
    local o = tonumber(off)
    if not w.v or w.v <= 0 then
      reply[#reply + 1], reply[#reply + 2] = 0, 0
    elseif (w.last and o <= w.last) or seen(w, id) then
      reply[#reply + 1], reply[#reply + 2] = w.v, 0
    else
      -- Writing a hash keeps its TTL: the window keeps its end. Past 2^53
      -- Lua's doubles round, and HINCRBY subtracts in int64 instead.
      local remaining
      if w.v >= 9007199254740992 then
        if w.changed then
          call('HSET', w.key, 'v', format('%d', w.v))
          w.changed = false
        end
        remaining = call('HINCRBY', w.key, 'v', '-' .. amount)
      else
        remaining, w.changed = w.v - tonumber(amount), true
      end
      local clamped = 0
      if remaining < 0 then
        remaining, clamped, w.changed = 0, 1, true
      end
      w.v, w.last, w.dirty = remaining, o, true
      w.latest = sub(w.latest .. id, -8 * LATEST)
      reply[#reply + 1], reply[#reply + 2] = remaining, clamped
    end
  end
end

for _, w in pairs(windows) do
  if w.dirty then
    if w.changed then
      call('HSET', w.key, 'v', format('%d', w.v), src, format('%d', w.last), 'r', w.latest)
    else
      call('HSET', w.key, src, format('%d', w.last), 'r', w.latest)
    end
  end
end
return reply
