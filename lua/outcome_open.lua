-- outcome_open: note an alert fraudwatch sent, with the orders it lists,
-- so that their outcomes judge it (docs/outcomes.md). Idempotent: every
-- receiver's claim that sends it calls this, and so does a label given to
-- an alert noted before there were outcomes.
--
-- KEYS[1]  the alert's record (outcome_prelude.lua)
-- KEYS[2]  the alerts: alert id -> when it opened (ms)
-- KEYS[3 .. 2+2n]  for each order ARGV[8 ..] names, in order: its outcome
--          (outcome_record.lua) and its links
-- KEYS[3+2n ..]    the records of the alerts ARGV[8+n ..] names, in order
-- ARGV[1]  the alert's id (rule/event id), 1 to 512 bytes
-- ARGV[2]  its rule, 1 to 64 bytes
-- ARGV[3]  its ref (JSON), 1 to 2,048 bytes
-- ARGV[4]  when it opened, ms (at most 15 digits); 0: now, by Redis's clock
-- ARGV[5]  how many alerts the records keep at most, 1 to 10,000,000
-- ARGV[6]  how long a record is kept, seconds (at most 10 digits)
-- ARGV[7]  n, how many order ids follow, 0 to 32
-- then n order ids (1 to 128 bytes, distinct), then at most 4 alert ids,
-- the oldest of KEYS[2] as the caller read them (candidates to drop)
--
-- Reply: {2} the alert had a record: nothing written; {1, change} noted
-- now, where change is empty, or 5 elements when the orders' outcomes
-- known already give it one (outcome_record.lua's changes); -1 an
-- argument is unusable, nothing written.
--
-- An order's links keep the 64 alerts that opened last: past them the
-- oldest link goes (that alert keeps the order, but the order's later
-- outcomes no longer reach it). Bounded: a call drops at most 4 records,
-- among those given, older than ARGV[6] or past ARGV[5]. The record lives
-- ARGV[6] from now, the links and the alerts ARGV[6] past their last
-- write. A key of another type goes.
local id, rule, ref, opened, max, life = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local n = ARGV[7] and string.match(ARGV[7], '^%d+$') and tonumber(ARGV[7])
if not (n and n <= 32 and #ARGV >= 7 + n and #ARGV <= 11 + n and #KEYS == #ARGV - 5 + n
    and #id >= 1 and #id <= 512 and #rule >= 1 and #rule <= 64 and #ref >= 1 and #ref <= 2048
    and (opened == '0' or string.match(opened, DIGITS)) and #opened <= 15
    and string.match(max, DIGITS) and #max <= 8 and tonumber(max) <= 10000000
    and string.match(life, DIGITS) and #life <= 10) then
  return -1
end
for i = 8, #ARGV do
  local bound = i < 8 + n and 128 or 512
  if #ARGV[i] < 1 or #ARGV[i] > bound then
    return -1
  end
end
if kind(KEYS[1], 'hash') == 'hash' then
  return {2}
end
kind(KEYS[2], 'zset')
local at = now()
local since = opened == '0' and at or tonumber(opened)
redis.call('HSET', KEYS[1], 'ref', ref, 'rule', rule, 'opened', tostring(since))
for i = 1, n do
  local order, outcome, links = ARGV[7 + i], KEYS[1 + 2 * i], KEYS[2 + 2 * i]
  local label = ''
  if kind(outcome, 'hash') == 'hash' then
    label = redis.call('HGET', outcome, 'label') or ''
  end
  redis.call('HSET', KEYS[1], 'o:' .. order, LABELS[label] and label or '')
  kind(links, 'zset')
  redis.call('ZADD', links, since, id)
  local over = redis.call('ZCARD', links) - 64
  if over > 0 then
    redis.call('ZREMRANGEBYRANK', links, 0, over - 1)
  end
  redis.call('EXPIRE', links, life)
end
local out = {1}
settle(KEYS[1], id, out, at)
redis.call('EXPIRE', KEYS[1], life)
redis.call('ZADD', KEYS[2], since, id)
local cutoff = at - tonumber(life) * 1000
for i = 8 + n, #ARGV do
  local old = ARGV[i]
  local score = tonumber(redis.call('ZSCORE', KEYS[2], old))
  if old ~= id and score and (score < cutoff or redis.call('ZCARD', KEYS[2]) > tonumber(max)) then
    redis.call('ZREM', KEYS[2], old)
    redis.call('DEL', KEYS[i + n - 5])
  end
end
redis.call('EXPIRE', KEYS[2], life)
return out
