-- silence_add: add a silence to a silences hash, which lives until its
-- latest silence ends.
--
-- KEYS[1]  a (rule, group)'s or a rule's silences: silence id -> its end,
--          milliseconds since 1970
-- ARGV[1]  silence id, 1 to 64 bytes
-- ARGV[2]  its end, milliseconds since 1970 (13 digits at most), later
--          than now
--
-- Reply: 1 added; -1 an argument is unusable, or the hash already holds
-- 100 silences (alert_claim reads them all); nothing written then.
local id, ends = ARGV[1], ARGV[2]
if not (type(id) == 'string' and #id >= 1 and #id <= 64 and type(ends) == 'string'
    and #ends <= 13 and string.match(ends, '^[1-9]%d*$') ~= nil) then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if tonumber(ends) <= now or redis.call('HLEN', KEYS[1]) >= 100 then
  return -1
end
redis.call('HSET', KEYS[1], id, ends)
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 or now + ttl < tonumber(ends) then
  redis.call('PEXPIREAT', KEYS[1], ends)
end
return 1
