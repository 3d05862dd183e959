-- outcome_record: record an order's outcome, and judge again, atomically,
-- every alert that lists the order (docs/outcomes.md).
--
-- KEYS[1]  the order's outcome: a hash of label, source, occurred (when
--          it happened, ms), recorded (when written, ms, by Redis's
--          clock), via (topic | slack | cli) and by (who; '' for the topic)
-- KEYS[2]  the order's links: the alerts that list it, a sorted set of
--          alert id -> when it opened (ms)
-- KEYS[3]  the orders with an outcome: order id -> when written (ms)
-- KEYS[4]  the fraud orders: order id -> when labelled fraud (ms)
-- KEYS[5 .. 4+n]  the records of the alerts ARGV[10 ..] names, in order
-- KEYS[5+n ..]    the outcomes of the orders ARGV[10+n ..] names, in order
-- ARGV[1]  the order id, 1 to 128 bytes
-- ARGV[2]  the label: fraud | legit | unclear
-- ARGV[3]  the source, 1 to 64 bytes
-- ARGV[4]  when it occurred, ms (positive, at most 15 digits)
-- ARGV[5]  via: topic | slack | cli
-- ARGV[6]  by, 0 to 256 bytes
-- ARGV[7]  how many orders the outcomes keep at most, 1 to 10,000,000
-- ARGV[8]  how long an outcome is kept, seconds (at most 10 digits)
-- ARGV[9]  n, how many alert ids follow, 0 to 128: every alert of the
--          links, as the caller read them
-- then n alert ids (1 to 512 bytes), then at most 4 order ids, the oldest
-- of KEYS[3] as the caller read them (candidates to drop)
--
-- Reply: {code, dropped, changes...}, where code is
--   1  the order's label changed (or it had none): written, and each
--      alert listing it judged again; changes are 5 elements an alert
--      whose outcome changed: its id, rule, previous outcome, new
--      outcome ('' for none), and the ms from its opening to its first
--      outcome (-1 when it had one before)
--   2  a later outcome with the same label: written, no alert changes
--   0  an outcome that occurred no later than the order's: older, the
--      same again, or another of the same time (the first written stays,
--      so that a redelivery never flips it back and counts it again):
--      nothing written
-- and dropped counts the orders this call dropped past the bounds (their
-- outcome, and their place in KEYS[3] and KEYS[4]). -2: the links name an
-- alert the call was not given (one opened since the caller read them):
-- nothing written, read them again. -1: an argument is unusable, nothing
-- written.
--
-- Bounded: a call drops at most 4 orders, among those given, that are
-- older than ARGV[8] or past ARGV[7] (each call adds at most one). The
-- outcome and both sets live ARGV[8] past the last write. A key of
-- another type (written by another) goes.
local order, label, source, occurred, via, by = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local max, life = ARGV[7], ARGV[8]
local n = ARGV[9] and string.match(ARGV[9], '^%d+$') and tonumber(ARGV[9])
if not (n and n <= 128 and #ARGV >= 9 + n and #ARGV <= 13 + n and #KEYS == #ARGV - 5
    and #order >= 1 and #order <= 128 and LABELS[label] and #source >= 1 and #source <= 64
    and string.match(occurred, DIGITS) and #occurred <= 15
    and (via == 'topic' or via == 'slack' or via == 'cli') and #by <= 256
    and string.match(max, DIGITS) and #max <= 8 and tonumber(max) <= 10000000
    and string.match(life, DIGITS) and #life <= 10) then
  return -1
end
local given = {}
for i = 10, #ARGV do
  if #ARGV[i] < 1 or #ARGV[i] > 512 then
    return -1
  end
  if i < 10 + n then
    given[ARGV[i]] = true
  end
end
kind(KEYS[1], 'hash')
kind(KEYS[3], 'zset')
kind(KEYS[4], 'zset')
if kind(KEYS[2], 'zset') == 'zset' then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
    if not given[id] then
      return -2
    end
  end
end
local had = redis.call('HMGET', KEYS[1], 'label', 'occurred')
local at, when = now(), tonumber(occurred)
local code = 1
if LABELS[had[1]] and tonumber(had[2]) then
  local before = tonumber(had[2])
  if when <= before then
    return {0, 0}
  end
  if label == had[1] then
    code = 2
  end
end
redis.call('HSET', KEYS[1], 'label', label, 'source', source, 'occurred', occurred, 'recorded', tostring(at),
  'via', via, 'by', by)
redis.call('ZADD', KEYS[3], at, order)
local out = {code, 0}
if code == 1 then
  if label == 'fraud' then
    redis.call('ZADD', KEYS[4], at, order)
  else
    redis.call('ZREM', KEYS[4], order)
  end
  for i = 1, n do
    local key, id = KEYS[4 + i], ARGV[9 + i]
    if redis.call('TYPE', key)['ok'] ~= 'hash' then
      redis.call('ZREM', KEYS[2], id) -- its record ended: the link with it
    elseif redis.call('HEXISTS', key, 'o:' .. order) == 1 then
      redis.call('HSET', key, 'o:' .. order, label)
      settle(key, id, out, at)
    end
  end
end
local cutoff = at - tonumber(life) * 1000
for i = 10 + n, #ARGV do
  local old = ARGV[i]
  local score = tonumber(redis.call('ZSCORE', KEYS[3], old))
  if old ~= order and score and (score < cutoff or redis.call('ZCARD', KEYS[3]) > tonumber(max)) then
    redis.call('ZREM', KEYS[3], old)
    redis.call('ZREM', KEYS[4], old)
    redis.call('DEL', KEYS[i - 5])
    out[2] = out[2] + 1
  end
end
redis.call('EXPIRE', KEYS[1], life)
redis.call('EXPIRE', KEYS[3], life)
if redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('EXPIRE', KEYS[4], life)
end
return out
