-- alert_observe: let one reader, of all replicas and receivers, observe an
-- alert's time to acknowledge (fraudwatch_alert_ack_seconds), once.
--
-- KEYS[1]  the alert's hash (alert_claim, alert_life)
--
-- Reply: {1, opened_at, acked_at} for the first to ask after the alert was
-- acknowledged (ack_observed is set now); {0} otherwise: not acknowledged,
-- asked before, or no hash (nothing is written, so that no hash is made
-- without its lifetime). A key of another type is none.
if #KEYS ~= 1 then
  return -1
end
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then
  return {0}
end
local v = redis.call('HMGET', KEYS[1], 'opened_at', 'acked_at', 'ack_observed')
if not v[1] or not v[2] or v[3] then
  return {0}
end
redis.call('HSET', KEYS[1], 'ack_observed', '1')
return {1, v[1], v[2]}
