-- alert_life: change an alert's life, as a person asks (a button, the CLI).
--
-- KEYS[1]  the alert's hash (Keys.Alert; alert_claim writes its life with
--          the send decision): status open | acknowledged | resolved,
--          opened_at, acked_by, acked_at, resolved_by, resolved_at (times
--          in milliseconds since 1970, by Redis's clock), assignee,
--          label, labelled_by, labelled_at, and version, which counts the
--          changes
-- ARGV[1]  the change: acknowledge | resolve | assign | label_fraud |
--          label_legit | label_unclear
-- ARGV[2]  who, 1 to 256 bytes ("slack:U123", "cli:alice")
--
-- Reply: {code, status, opened_at, acked_by, acked_at, resolved_by,
-- resolved_at, assignee, version, label, labelled_by, labelled_at}, "" for
-- a field not set, where code is
--   1  changed now
--   2  unchanged: it was so already
-- or {0}: the alert has no life (never sent, or it ended with its
-- records); -1: an argument is unusable. Nothing written but a change.
--
-- The first acknowledgement stays. Resolving an acknowledged or open
-- alert resolves it, keeping who acknowledged it. A resolved alert is
-- final: an acknowledgement or an assignment after it changes nothing
-- (answered 2, as it is). An assignment replaces the assignee. A label
-- may come after resolving as well as before (docs/outcomes.md): the
-- same label again is unchanged (2), whoever gives it; another replaces
-- it. The hash keeps its lifetime: a change never makes it outlive its
-- records. A key of another type is none.
local op, who = ARGV[1], ARGV[2]
local label = op == 'label_fraud' and 'fraud' or op == 'label_legit' and 'legit' or op == 'label_unclear' and 'unclear'
if not (#KEYS == 1 and (op == 'acknowledge' or op == 'resolve' or op == 'assign' or label)
    and type(who) == 'string' and #who >= 1 and #who <= 256) then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0}
end
local fields = {'status', 'opened_at', 'acked_by', 'acked_at', 'resolved_by', 'resolved_at', 'assignee', 'version',
  'label', 'labelled_by', 'labelled_at'}
local function reply(code)
  local v = redis.call('HMGET', KEYS[1], unpack(fields))
  local out = {code}
  for i = 1, #fields do
    out[i + 1] = v[i] or ''
  end
  return out
end
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'open' and status ~= 'acknowledged' and status ~= 'resolved' then
  return {0}
end
if label then
  if redis.call('HGET', KEYS[1], 'label') == label then
    return reply(2)
  end
elseif status == 'resolved' or (op == 'acknowledge' and status == 'acknowledged')
    or (op == 'assign' and redis.call('HGET', KEYS[1], 'assignee') == who) then
  return reply(2)
end
local t = redis.call('TIME')
local now = tostring(tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if label then
  redis.call('HSET', KEYS[1], 'label', label, 'labelled_by', who, 'labelled_at', now)
elseif op == 'acknowledge' then
  redis.call('HSET', KEYS[1], 'status', 'acknowledged', 'acked_by', who, 'acked_at', now)
elseif op == 'resolve' then
  redis.call('HSET', KEYS[1], 'status', 'resolved', 'resolved_by', who, 'resolved_at', now)
else
  redis.call('HSET', KEYS[1], 'assignee', who)
end
-- Not HINCRBY: a field that is no integer must not fail the change.
local version = math.max(0, math.floor(tonumber(redis.call('HGET', KEYS[1], 'version')) or 0))
redis.call('HSET', KEYS[1], 'version', tostring(version + 1))
return reply(1)
