-- alert_budget: take one message from a channel's budget and from the
-- overall one, or from neither: token buckets that every replica shares,
-- so that fraudwatch as a whole stays within Slack's rate limits. Every
-- message takes one: an alert, a digest, a parked alert's retry.
--
-- KEYS[1]  the channel's bucket: a hash of tokens (t) and when it was last
--          filled (at, ms)
-- KEYS[2]  the overall bucket, the same way (same hash tag)
-- ARGV[1]  the channel's rate, messages per second (a positive number)
-- ARGV[2]  the channel's burst, messages (a positive integer)
-- ARGV[3]  the overall rate
-- ARGV[4]  the overall burst
--
-- Reply: {1, 0} taken from both; {0, ms} one of them is empty, nothing
-- taken, and ms is how long until both hold a message again (at their
-- rates, if no one else takes one meanwhile); {-1, -1} an argument is
-- unusable, nothing written. A bucket of another type (written by another)
-- is full, and a take replaces it: with redis.call, every message would
-- fail to take its budget.
local rate, burst, all_rate, all_burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if not (rate and rate > 0 and burst and burst >= 1 and burst <= 100000 and burst == math.floor(burst)
    and all_rate and all_rate > 0 and all_burst and all_burst >= 1 and all_burst <= 100000
    and all_burst == math.floor(all_burst) and #KEYS == 2) then
  return {-1, -1}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- level is the bucket's tokens now: what it held, refilled since.
local function level(key, r, b)
  local got = redis.pcall('HMGET', key, 't', 'at')
  local tokens, at = tonumber(got[1]), tonumber(got[2]) -- nil in an error's table
  if not tokens or not at then
    return b
  end
  return math.min(b, tokens + math.max(0, now - at) * r / 1000)
end

local mine, all = level(KEYS[1], rate, burst), level(KEYS[2], all_rate, all_burst)
if mine < 1 or all < 1 then
  local wait = math.max((1 - mine) / rate, (1 - all) / all_rate) * 1000
  return {0, math.ceil(wait)}
end
for _, b in ipairs({{KEYS[1], mine - 1, rate, burst}, {KEYS[2], all - 1, all_rate, all_burst}}) do
  local set = redis.pcall('HSET', b[1], 't', tostring(b[2]), 'at', now)
  if type(set) == 'table' then
    -- Only another type is replaced: any other error (out of memory)
    -- fails the call.
    if string.sub(set.err, 1, 9) == 'WRONGTYPE' then
      redis.call('DEL', b[1])
    end
    redis.call('HSET', b[1], 't', tostring(b[2]), 'at', now)
  end
  -- An idle bucket is full again after burst / rate: it may go.
  redis.call('PEXPIRE', b[1], math.ceil(b[4] / b[3] * 1000) + 1000)
end
return {1, 0}
