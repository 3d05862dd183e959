-- alert_index: add an alert to the index of open alerts, which lists them
-- by id (fraudwatch alert list, the status page) in a slot of its own, and
-- keep the index within its bounds.
--
-- KEYS[1]  the index: a sorted set of alert ids, scored by when each was
--          added (milliseconds since 1970, by Redis's clock)
-- KEYS[2]  the refs: alert id -> its Ref (JSON: rule, group, event id),
--          which names its keys
-- ARGV[1]  the alert's id, 1 to 512 bytes
-- ARGV[2]  its ref, 1 to 2,048 bytes
-- ARGV[3]  how many alerts the index holds at most, 1 to 1,000,000
-- ARGV[4]  how long an alert stays in it at most, seconds (positive, at
--          most 10 digits): as long as its hash lives
--
-- Reply: 1 added; 0 it was there (its score, its first, is kept); -1 an
-- argument is unusable, nothing written.
--
-- Bounded: each call drops at most 100 entries older than ARGV[4], and at
-- most 100 of the oldest past ARGV[3], so that the index returns within its
-- bounds as it is added to. Whoever reads it drops the alerts resolved or
-- gone (their hash is in another slot: not here). Both keys live ARGV[4]
-- past the last call. Keys of another type (written by another) go.
local id, ref, max, age = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if not (#KEYS == 2 and type(id) == 'string' and #id >= 1 and #id <= 512
    and type(ref) == 'string' and #ref >= 1 and #ref <= 2048
    and type(max) == 'string' and string.match(max, '^[1-9]%d*$') and #max <= 7 and tonumber(max) <= 1000000
    and type(age) == 'string' and string.match(age, '^[1-9]%d*$') and #age <= 10) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'zset' then
  redis.call('DEL', KEYS[1])
end
if redis.call('TYPE', KEYS[2])['ok'] ~= 'hash' then
  redis.call('DEL', KEYS[2])
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local added = redis.call('ZADD', KEYS[1], 'NX', now, id)
redis.call('HSET', KEYS[2], id, ref)
local function drop(ids)
  if #ids > 0 then
    redis.call('ZREM', KEYS[1], unpack(ids))
    redis.call('HDEL', KEYS[2], unpack(ids))
  end
end
drop(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. (now - tonumber(age) * 1000), 'LIMIT', 0, 100))
local over = redis.call('ZCARD', KEYS[1]) - tonumber(max)
if over > 0 then
  drop(redis.call('ZRANGE', KEYS[1], 0, math.min(over, 100) - 1))
end
redis.call('EXPIRE', KEYS[1], age)
redis.call('EXPIRE', KEYS[2], age)
return added
