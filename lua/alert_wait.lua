-- alert_wait: keep the claimed alerts of one rule that are past their
-- destination's budget until a drainer sends them as one message, so that
-- they wait in Redis instead of on their partition of the alerts topic. A
-- rule's alerts come in to a hash of new ones; a drainer seals them (the new
-- hash becomes the sealed one, which new alerts do not enter), sends the
-- sealed ones, and drops them once settled: a drainer that dies between
-- leaves them sealed for the next, and nothing is lost. The first alert of a
-- new hash is kept whole, the others compact (the caller's two forms): a
-- digest lists every alert by what the compact form keeps, and a rule with
-- a single alert waiting posts it whole.
--
-- KEYS[1]  the index: a hash of rule -> "<alerts waiting>:<channel>" (the
--          rule's channel as its last alert came in), over every rule
-- KEYS[2]  the rule's new alerts: a hash of alert id -> the alert
-- KEYS[3]  the rule's sealed alerts, the same way
-- (all three in one hash tag)
-- ARGV[1]  the operation: add | seal | done
-- ARGV[2]  the rule, 1 to 64 bytes
-- add:  ARGV[3] the alert id, 1 to 256 bytes; ARGV[4] the alert whole,
--       ARGV[5] compact, each 1 to 65536 bytes; ARGV[6] how many alerts
--       may wait, over every rule, 1 to 1000000; ARGV[7] how long the
--       hashes live after the last alert came in, seconds; ARGV[8] the
--       rule's channel, at most 512 bytes
-- seal: nothing more
-- done: ARGV[3...] the ids of sealed alerts that are settled
--
-- Reply: add: 1 waits now; 2 waits already (new or sealed; nothing
-- written); 0 as many alerts as may wait are waiting (nothing written).
-- seal: how many alerts are sealed (those sealed before, not yet done,
-- or the new ones, now sealed); 0 when none waits. done: how many alerts of
-- the rule still wait. -1: an argument is unusable, nothing written.
-- Every operation writes the rule's count in the index again from its two
-- hashes, so that a count that went wrong (hashes expired) is right again
-- the next time a drainer visits its rule. A key of another type (written
-- by another) holds nothing of these, and goes: with redis.call, every
-- call would fail, and alerts stay on their partitions for good.
local op, rule = ARGV[1], ARGV[2]
if not (#KEYS == 3 and type(rule) == 'string' and #rule >= 1 and #rule <= 64
    and (op == 'add' or op == 'seal' or op == 'done')) then
  return -1
end
local index, new, sealed = KEYS[1], KEYS[2], KEYS[3]

local function hlen(key)
  local n = redis.pcall('HLEN', key)
  if type(n) == 'table' then
    redis.call('DEL', key)
    return 0
  end
  return n
end

-- entry is the rule's entry in the index: its count and channel.
local function entry()
  local v = redis.pcall('HGET', index, rule)
  if type(v) == 'table' then
    redis.call('DEL', index)
    return 0, ''
  end
  if not v then
    return 0, ''
  end
  local n, ch = string.match(v, '^(%d+):(.*)$')
  return tonumber(n) or 0, ch or ''
end

local function recount(channel)
  local n = hlen(new) + hlen(sealed)
  if n == 0 then
    redis.call('HDEL', index, rule)
  else
    redis.call('HSET', index, rule, n .. ':' .. channel)
  end
  return n
end

if op == 'seal' then
  local _, channel = entry()
  local n = hlen(sealed)
  if n == 0 and hlen(new) > 0 then
    redis.call('RENAME', new, sealed) -- its lifetime with it
    n = hlen(sealed)
  end
  recount(channel)
  return n
end

if op == 'done' then
  local _, channel = entry()
  if hlen(sealed) > 0 then
    for i = 3, #ARGV do
      redis.call('HDEL', sealed, ARGV[i])
    end
  end
  return recount(channel)
end

local id, whole, compact, cap, life, channel = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8]
if not (type(id) == 'string' and #id >= 1 and #id <= 256
    and type(whole) == 'string' and #whole >= 1 and #whole <= 65536
    and type(compact) == 'string' and #compact >= 1 and #compact <= 65536
    and cap and cap >= 1 and cap <= 1000000 and cap == math.floor(cap)
    and type(life) == 'string' and #life <= 10 and string.match(life, '^[1-9]%d*$')
    and type(channel) == 'string' and #channel <= 512) then
  return -1
end
entry() -- an index of another type goes before it is read whole
local fresh, held = hlen(new), hlen(sealed)
if redis.call('HEXISTS', new, id) == 1 or redis.call('HEXISTS', sealed, id) == 1 then
  return 2
end
local total = 0
local counts = redis.call('HVALS', index)
for i = 1, #counts do
  total = total + (tonumber(string.match(counts[i], '^(%d+):')) or 0)
end
if total >= cap then
  return 0
end
if fresh == 0 then
  redis.call('HSET', new, id, whole)
else
  redis.call('HSET', new, id, compact)
end
redis.call('HSET', index, rule, (fresh + 1 + held) .. ':' .. channel)
redis.call('EXPIRE', new, life)
redis.call('EXPIRE', index, life)
if held > 0 then
  redis.call('EXPIRE', sealed, life)
end
return 1
