-- alert_park: keep an alert whose channel Slack refuses, until a retry
-- delivers it, in a hash of bounded size, so that a rule with a mistyped
-- channel cannot fill Redis.
--
-- KEYS[1]  the parked alerts: a hash of alert id -> the alert
-- ARGV[1]  alert id, 1 to 256 bytes
-- ARGV[2]  the alert, 1 to 65536 bytes
-- ARGV[3]  how many alerts the hash may hold, 1 to 1000000
-- ARGV[4]  how long the hash lives after its last alert is parked,
--          seconds (the parked alerts' lifetime)
--
-- Reply: 1 parked, a new one; 2 parked again, replacing its copy (the
-- hash holds as many as before); 0 the hash is full, nothing written; -1 an
-- argument is unusable, nothing written. A value of
-- another type at the key (written by another) holds no parked alert, and
-- goes: with redis.call, every park would fail, and its alert stay on its
-- partition for good.
local id, data, cap, life = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
if not (#KEYS == 1 and type(id) == 'string' and #id >= 1 and #id <= 256
    and type(data) == 'string' and #data >= 1 and #data <= 65536
    and cap and cap >= 1 and cap <= 1000000 and cap == math.floor(cap)
    and type(life) == 'string' and #life <= 10 and string.match(life, '^[1-9]%d*$')) then
  return -1
end
local parked = redis.pcall('HEXISTS', KEYS[1], id)
if type(parked) == 'table' then
  redis.call('DEL', KEYS[1])
  parked = 0
end
if parked == 0 and redis.call('HLEN', KEYS[1]) >= cap then
  return 0
end
redis.call('HSET', KEYS[1], id, data)
redis.call('EXPIRE', KEYS[1], life)
return 1 + parked
