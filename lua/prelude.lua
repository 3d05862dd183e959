-- prelude: what the counting scripts share, prepended to incr_and_check,
-- sales_decr, slide_and_check and distinct_and_check, and to evidence_add,
-- which takes its decoder (lua.go; the same text is in each script's SHA1).
--
-- A bucket's offsets (KEYS[1]) are a hash with a field per source partition
-- and script ('c:', 'r:', 's:' and 'd:' before the partition's name): the
-- last offset applied here from it. A call carries one
-- partition's run of events for the bucket, and the calls of a bucket and
-- partition cover increasing, disjoint runs of offsets, so the field is read
-- once and written once a call. A producer's retry (the same event at a
-- later offset) is the consumer's to catch, before any script
-- (docs/design.md, Delivery guarantees).
--
-- A call's numbers come packed into one binary string, ARGV[2] (lua/pack.go
-- packs it; each script's header gives its layout), which Redis's struct
-- library unpacks in C: the form of every number is the packing's, so only
-- the string's length and each value's range are checked. Unpacked, numbers
-- are Lua's doubles: the values that go to Redis (thresholds, amounts) are
-- below 2^53, which the Go side enforces and the scripts check. A number
-- handed to redis.call is formatted by Redis, in exponent form past some
-- digits on 7.2 and later, which INCRBY and EXPIRE refuse: every number
-- a script sends Redis goes through format('%d'), but an increment of 1,
-- which goes as the string '1'.
--
-- The scripts are straight-line code; no function is made on a path a
-- change commonly takes, only the exact comparison past 2^53 (made only
-- there). Redis runs a script's chunk anew at every call, so each function
-- is a closure made again, with its upvalues, every call, and each call of
-- one is a Lua call frame. Measured side by side, incr_and_check written
-- with eleven helper functions took 17 µs of Redis time a call of one change
-- and 4.1 µs a change in calls of 8; written straight, 11.5 and 3.4; packed,
-- a quarter and a fifth less again (lua/seedbench/cheapcall). What a change
-- needs is inline in each script's loop, in a few lines each script
-- repeats: the offsets' field is read (a value of another type under the
-- key, written by another, is no offsets, and goes, so that the call's HSET
-- writes them anew: read with redis.call, it would fail the call, and the
-- batch on every retry); a change counts when its offset is above the last
-- one applied (or equal to the one this call applied, for an event's other
-- windows); at the end the field is written when the call applied an
-- offset, and the hash's TTL lengthened (never shortened: the scripts share
-- the hash) when the call gave a window or a mark its lifetime.
local call, pcall, tonumber, match, sub, format, type = redis.call, redis.pcall, tonumber, string.match, string.sub, string.format, type
local KEYS, ARGV = KEYS, ARGV
-- An offset read back: digits without leading zeros, at most 15.
local DIGITS = '^[1-9]%d*$'
local TWO53, OFFSETS = 9007199254740992, 1000000000000000

local decode = rawget(_G, 'struct') and struct.unpack
if not decode then
  -- Lua without Redis's struct library (miniredis, where the backtest's
  -- --lua runs the scripts): the few formats the scripts use ('<', B, H,
  -- I4, i8, x), little-endian, decoded in Lua. Never made on Redis.
  local byte = string.byte
  decode = function(f, s, pos)
    local out, k, j = {}, 0, 1
    pos = pos or 1
    while j <= #f do
      local c, size = sub(f, j, j), 1
      local d = match(f, '^%d', j + 1)
      j = j + (d and 2 or 1)
      size = d and tonumber(d) or (c == 'H' and 2 or 1)
      if c == 'x' then
        pos = pos + 1
      elseif c ~= '<' then
        local v, neg = 0, c == 'i' and byte(s, pos + size - 1) >= 128
        for b = pos + size - 1, pos, -1 do
          v = v * 256 + (neg and 255 - byte(s, b) or byte(s, b))
        end
        k = k + 1
        out[k] = neg and -v - 1 or v
        pos = pos + size
      end
    end
    out[k + 1] = pos
    return unpack(out, 1, k + 1)
  end
end
