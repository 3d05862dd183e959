-- incr_and_check: count a run of events, all from one Kafka partition and
-- in its order, into the fixed windows of the rules of one bucket of groups,
-- each event at most once, and tell for each whether it crossed a threshold
-- first; keep the orders near a window's threshold as its evidence, in the
-- same call.
--
-- KEYS[1]     the bucket's offsets: a hash with a field per source partition
--             and script, the last offset applied here from it
-- KEYS[2i]    window i; its TTL is its end. When its rule keeps no
--             evidence, a string: its count (INCRBY). When it keeps some, a
--             hash: field 'c' is its count; each order its evidence keeps
--             is a field named by the count it took the window to
--             (decimal), its entry the value
-- KEYS[2i+1]  window i's crossing marks: a hash of event id -> counter
-- ARGV[1]     the source partition's name, 1 to 32 bytes
-- ARGV[2]     the call's numbers, packed little-endian (lua/pack.go):
--             how long crossing marks live, seconds (uint32, >= 1); n, the
--             number of windows (uint8, 1..64); per window its length,
--             seconds (uint32, >= 1), its threshold (int64, 1..2^53-1), how
--             many entries its evidence keeps (uint8, 0..20; 0 keeps none)
--             and the count from which it keeps an order's (int64,
--             1..threshold; any when it keeps none);
--             then per event and window: window index (uint8, 1..n),
--             offset (int64, 0..10^15-1), event id (8 bytes), increment
--             (int64, 1..2^53-1). 5 + 21 n + 25 a change bytes.
-- ARGV[3]     the changes' evidence entries, joined ('' when no window
--             keeps evidence)
-- ARGV[4]     per change, its entry's start and end in ARGV[3] (uint32
--             each: its bytes s0 + 1 to s1), or '' with ARGV[3]: 8 a change bytes.
--             An entry that is empty, longer than 512 bytes or holds RS
--             (\30) is not kept; its change still counts.
--
-- Reply: two integers per event and window, in order: {current, 1} when
-- prev < threshold <= current (this event crossed first), {current, 0}
-- otherwise, {-1, -1} when its arguments or its window are unusable: then it
-- wrote nothing to the window, and the others still count. Call arguments
-- that are unusable (keys, source, lifetime, counts, spans) make the reply a
-- single {-1, -1}. A key of another type (written by another) never fails
-- the call: a window's counter that INCRBY and HINCRBY both refuse (a list,
-- a hash whose 'c' is no integer) is unusable, as above; its marks are
-- none, and a crossing replaces them; the offsets are none, and are
-- replaced.
--
-- "Already counted?" is asked once per event, not per window: the caller
-- sends a partition's events of one bucket in calls that cover increasing,
-- disjoint runs of offsets, and Kafka redelivers a partition in order from
-- its committed offset, so an offset at or below the last one applied here
-- was applied, to every window of this bucket, in the call that applied it.
-- An event applied before changes nothing and is answered the counter as it
-- is, and 1 if it crossed, from its mark, so that its alert is handed off
-- again should the first hand-off have been lost. The offsets outlive the
-- marks and windows: a redelivery may come as late as a mark lives.
--
-- Thresholds and increments are below 2^53, exact in Lua's doubles; a
-- counter past 2^53 is compared exactly, as digits (HGET).
--
-- Evidence: a window whose rule keeps evidence writes the entry of each
-- order that takes it to a count from its 'from' (threshold - keep + 1 for
-- a count; the amount's, where orders near the threshold start) up to its
-- threshold, and of the crossing, each in a field of its own (HSET), named
-- by that count: no write reads first, and HINCRBY on 'c' is never refused
-- by what the entries hold. A hash of small fields stays a listpack, one
-- allocation (values of 64 bytes or less, hash-max-listpack-value): a
-- string holding the entries after the count cost a read before every
-- count (Performance, Evidence). A count's window holds at most keep
-- entries; an amount's is trimmed to its keep highest counts when it holds
-- more than 2 keep (HLEN, HKEYS, HDEL: rare). The caller reads a crossing's
-- evidence afterwards (HGETALL), its entries by count, highest first.
--
-- The layout follows the rule, which the caller names (keep): a window
-- with no entries to keep pays no hash (its memory, HINCRBY's lookup of
-- a field). A window of the other layout (its rule's evidence turned on
-- or off by a reload) is read as it is: INCRBY refused, a hash counts by
-- HINCRBY until its window ends; a string of a keeping window moves into
-- a hash, as below.
--
-- A counter of the version before (a string: "<count>" RS entry ...; the
-- count digits without a leading zero, at most 2^62), or a plain string
-- counter of a keeping window, has its count moved into the hash at its
-- next change (HINCRBY refuses it once: GET, PTTL, DEL, HSET, PEXPIRE),
-- its end kept and its entries dropped (Upgrades, docs/operations.md); a
-- redelivery reads its count. Any other string is unusable; so is a field
-- c that HINCRBY refuses, and, for a redelivery, one that is not such
-- digits.
--
-- It runs after prelude.lua, which it shares with sales_decr.
local MAX_WINDOWS, MAX_CHANGES = 64, 4096
local TWO62 = 4611686018427387904
local find, RS = string.find, '\30'
local MAX_KEEP, MAX_ENTRY = 20, 512
-- The largest count of the version before, as it saturated: HINCRBY then
-- never overflows (increments are below 2^53).
local MAX_COUNT = '4611686018427387904'

local src, packed, texts, spans = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
if not (#ARGV == 4 and #src >= 1 and #src <= 32 and #packed >= 5) then
  return {-1, -1}
end
local life, n, pos = decode('<I4B', packed)
local changes = (#packed - 5 - 21 * n) / 25
if not (life >= 1 and n >= 1 and n <= MAX_WINDOWS and #KEYS == 2 * n + 1
    and changes >= 1 and changes <= MAX_CHANGES and changes % 1 == 0
    and (#spans == 0 or #spans == 8 * changes)) then
  return {-1, -1}
end
-- A window with an unusable length or threshold (thresholds[i] false)
-- refuses its changes; the other windows still count. A window whose rule
-- keeps evidence has its threshold negated: one table, read once a change.
-- A window's length is read again from ARGV[2] (at 6 + 21 (i - 1)) on the
-- rare paths that need it, a new window and the offsets' lifetime: tables
-- filled for every window cost a call of 8 changes about a tenth of its
-- time side by side (lua/seedbench/cheapcall/README.md).
local thresholds, froms = {}, {}
for i = 1, n do
  local length, threshold, keep, from
  length, threshold, keep, from, pos = decode('<I4i8Bi8', packed, pos)
  local ok = length >= 1 and threshold >= 1 and threshold < TWO53 and keep <= MAX_KEEP
      and (keep == 0 or from >= 1 and from <= threshold)
  thresholds[i] = ok and (keep > 0 and -threshold or threshold)
  if ok and keep > 0 then
    froms[i] = from
  end
end

local field = 'c:' .. src
local last = pcall('HGET', KEYS[1], field)
if type(last) == 'table' then
  call('DEL', KEYS[1])
end
last = type(last) == 'string' and #last <= 15 and (last == '0' or match(last, DIGITS)) and tonumber(last) or -1
local dirty, refresh = false, false

-- The loop runs for every change: what a change needs is inline, and the
-- rare paths (a new window, a crossing, a change applied before) are too,
-- so that no function is made for them every call. A change's event id is
-- read (sub) only where it is needed, a crossing or a redelivery.
local reply, r, values = {}, 0, {}
for nth = 1, changes do
  local at, i, o, by = pos
  i, o, by, pos = decode('<Bi8xxxxxxxxi8', packed, pos)
  local t = thresholds[i] -- nil past 1..n
  local v, first = -1, -1
  if t and o >= 0 and o < OFFSETS and by >= 1 and by < TWO53 then
    local keep = t < 0
    if keep then
      t = -t
    end
    local key = KEYS[2 * i]
    -- Counted before: at or below the last offset applied, and not this
    -- call's own (an event's other windows).
    local fresh = o > last -- last is -1 when none was applied
    if fresh then
      last, dirty = o, true
    else
      fresh = dirty and o == last
    end
    if fresh then
      local inc = by == 1 and '1' or format('%d', by)
      -- A window whose rule keeps no evidence is a plain string counter;
      -- INCRBY refuses one written while its rule kept some (a hash,
      -- before a reload) or of the version before with entries, which
      -- the hash's path below then takes, as a keeping window's.
      local hashed = keep
      if not keep then
        v = pcall('INCRBY', key, inc)
        hashed = type(v) == 'table'
      end
      if hashed then
        v = pcall('HINCRBY', key, 'c', inc)
      end
      if hashed and type(v) == 'table' and sub(v.err, 1, 9) == 'WRONGTYPE' then
        -- A counter of the version before, a string: its count into the
        -- hash, its end kept, its entries dropped (they name no count);
        -- the change then counts. Once a window, at an upgrade.
        local got = pcall('GET', key)
        local c = type(got) == 'string' and (match(got, '^(%d+)\30') or match(got, '^%d+$'))
        if c and (c == '0' or match(c, DIGITS)) and (#c < 19 or #c == 19 and c <= MAX_COUNT) then
          local left = call('PTTL', key)
          call('DEL', key)
          call('HSET', key, 'c', c)
          if left > 0 then
            call('PEXPIRE', key, format('%d', left))
          end
          v = pcall('HINCRBY', key, 'c', inc)
        end
      end
      if type(v) == 'number' then
        first = 0
        if v == by or v >= t then
          -- A window gets its length when it reads -1, which only a new
          -- window or one something made persistent can (a restore, a
          -- migration, PERSIST). The latter is caught when it reaches its
          -- threshold, and its counts are of unknown age: it starts again
          -- with this change alone, its entries gone, so that no alert
          -- counts changes older than the window. A running TTL is never
          -- reset, so a steady trickle cannot keep a window open for ever.
          if call('TTL', key) == -1 then
            local length = format('%d', (decode('<I4', packed, 6 + 21 * (i - 1))))
            if v ~= by then
              call('DEL', key)
              if hashed then
                call('HSET', key, 'c', inc)
              else
                call('SET', key, inc)
              end
              v = by
            end
            call('EXPIRE', key, length)
            refresh = true
          end
          if v >= t then
            local exact
            if v < TWO53 then
              first = (v - by < t) and 1 or 0
            else
              -- Past 2^53 Lua's doubles round: the counter is read as
              -- digits, compared in two parts doubles hold exactly, the
              -- last 9 digits and the rest: v - inc < t, as v < inc + t.
              exact = hashed and call('HGET', key, 'c') or call('GET', key)
              local function parts(s)
                if #s <= 9 then
                  return 0, tonumber(s)
                end
                return tonumber(sub(s, 1, -10)), tonumber(sub(s, -9))
              end
              local vh, vl = parts(exact)
              local ih, il = parts(inc)
              local th, tl = parts(format('%d', t))
              local sh, sl = ih + th, il + tl
              if sl >= 1000000000 then
                sh, sl = sh + 1, sl - 1000000000
              end
              first = (vh < sh or (vh == sh and vl < sl)) and 1 or 0
            end
            if v >= TWO62 then
              -- Saturate at 2^62, far above any threshold (below 2^53), so
              -- that HINCRBY never fails on overflow, which no retry cures.
              if hashed then
                call('HSET', key, 'c', MAX_COUNT)
              else
                call('SET', key, MAX_COUNT, 'KEEPTTL')
              end
              v = TWO62
            end
            if first == 1 then
              -- Marks of another type (written by another) are replaced:
              -- a crossing leaves its mark, or a redelivery would answer
              -- 0 and its alert's hand-off could be lost. Any other error
              -- (out of memory) fails the call.
              local marks, marked, id = KEYS[2 * i + 1], exact or format('%d', v), sub(packed, at + 9, at + 16)
              local set = pcall('HSET', marks, id, marked)
              if type(set) == 'table' then
                if sub(set.err, 1, 9) == 'WRONGTYPE' then
                  call('DEL', marks)
                end
                call('HSET', marks, id, marked)
              end
              call('EXPIRE', marks, format('%d', life))
              refresh = true
            end
          end
        end
        if keep and #spans > 0 and v < 1e15 and (first == 1 or v >= froms[i] and v < t) then
          local s0, s1 = decode('<I4I4', spans, 8 * nth - 7)
          local e = s1 > s0 and s1 - s0 <= MAX_ENTRY and s1 <= #texts and sub(texts, s0 + 1, s1)
          if e and not find(e, RS, 1, true) then
            call('HSET', key, format('%d', v), e)
            local kept = decode('<B', packed, 18 + 21 * (i - 1))
            -- A count's window never holds more than keep entries (from is
            -- threshold - keep + 1); an amount's is trimmed past 2 keep.
            if v - froms[i] >= kept and call('HLEN', key) > 2 * kept + 1 then
              local all, counts = call('HKEYS', key), {}
              for _, f in ipairs(all) do
                -- Only fields the script writes: a count of at most 15
                -- digits, which format gives back as it was.
                if #f <= 15 and match(f, DIGITS) then
                  counts[#counts + 1] = tonumber(f)
                end
              end
              table.sort(counts)
              for k = 1, #counts - kept do
                call('HDEL', key, format('%d', counts[k]))
              end
            end
          end
        end
      else
        v, first = -1, -1
      end
    else
      -- Applied before: its mark, or the counter's count as it is (-1
      -- when HGET and GET refuse the key; a string's count, of the
      -- version before). Marks of another type are none.
      local mark = tonumber(pcall('HGET', KEYS[2 * i + 1], sub(packed, at + 9, at + 16)))
      if mark then
        v, first = mark, 1
      else
        -- values holds what redeliveries read, which come before a
        -- call's fresh changes (its offsets increase): a fresh change
        -- does not store its count there, a table write a change.
        -- A keeping window's count is its hash's c, another's its
        -- string's (or a string of the version before: its count first);
        -- the other layout is read when the first is refused.
        if not values[i] then
          local got, str = nil, not keep
          if keep then
            got = pcall('HGET', key, 'c')
            str = type(got) == 'table'
          end
          if str then
            got = pcall('GET', key)
            if type(got) == 'string' then
              got = match(got, '^(%d+)\30') or match(got, '^%d+$') or -1
            elseif type(got) == 'table' then
              got = keep and -1 or pcall('HGET', key, 'c')
            end
          end
          values[i] = not got and 0 or type(got) == 'string' and (got == '0' or match(got, DIGITS)) and tonumber(got) or -1
        end
        v = values[i]
        first = v == -1 and -1 or 0
      end
    end
  end
  reply[r + 1], reply[r + 2] = v, first
  r = r + 2
end

-- The offsets get their lifetime when a window or a mark got one, or when
-- the field is new: they then outlive every window and mark of the bucket.
-- A call that only adds to running windows leaves it as it is.
if dirty and call('HSET', KEYS[1], field, format('%d', last)) == 1 or refresh then
  -- Never shorter: the scripts share the hash, and a call whose life is
  -- short must not cut what a longer window's call gave it. GT counts no
  -- TTL as infinite: a new hash gets its life from NX.
  local longest = life
  for w = 1, n do
    local length = decode('<I4', packed, 6 + 21 * (w - 1))
    if thresholds[w] and length > longest then
      longest = length
    end
  end
  local l = format('%d', longest)
  if call('EXPIRE', KEYS[1], l, 'GT') == 0 then
    call('EXPIRE', KEYS[1], l, 'NX')
  end
end
return reply
