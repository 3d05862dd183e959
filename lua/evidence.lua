-- evidence: a window's latest orders near its threshold, kept by the
-- scripts that count orders (incr_and_check, slide_and_check,
-- distinct_and_check) in the very call that counts them, so that the alert
-- of a crossing can list them. lua.go puts this text into each of them
-- where it says --[[evidence.lua]], inside `if m > 0 then`, with n (the
-- windows), m (those that keep evidence), ev_args (ARGV's index of the
-- first of them) and ev_keys (KEYS' index before the first evidence key)
-- set: a call without evidence makes none of its functions (prelude.lua
-- says what a function costs a call).
--
-- KEYS[ev_keys+j]     the j-th such window's evidence: a string, its entry
--                     count as one byte (1..20), then its entries newest
--                     first, each ending with RS (\30)
-- ARGV[ev_args+3j-3]  its window's index (1..n, each at most once); how
--                     many entries it keeps (1..20); the value from which
--                     it keeps them (its threshold less its evidence, or
--                     half of it)
--
-- An entry is the order's text as the caller sent it, 'time US amount US
-- US event id US order id US value' (US \31), with the window's value after
-- the order put between the two US's, which only the script knows; a text
-- without them is kept as it came, and its reader drops it. A window's
-- evidence is read once a call (GET) and written once (SET), its new
-- entries first and then as many of the old as keep leaves room for; a new
-- one, and a sliding window's at every write, takes the window's remaining
-- life (PTTL, after the call's writes to the window), else it keeps its
-- own; without a TTL on the window, the window's length. A value not of
-- this form (written by another), of any type, is replaced. Entries are
-- not checked for repeats: a redelivered order is kept again, and the
-- reader drops repeats. Why a string and not a list: docs/design.md.
local byte, char, concat = string.byte, string.char, table.concat
if #ARGV >= ev_args + 3 * m - 1 then
  kept = {}
  for j = 1, m do
    local a = ev_args + 3 * j - 3
    local is, ks, fs = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local i = #is <= 2 and match(is, DIGITS) and tonumber(is)
    local keep = #ks <= 2 and match(ks, DIGITS) and tonumber(ks)
    if not (i and i <= n and not kept[i] and keep and keep <= 20 and #fs <= 18 and match(fs, DIGITS)) then
      kept = nil
      break
    end
    kept[i] = {key = KEYS[ev_keys + j], keep = keep, from = tonumber(fs), new = {}, count = 0}
  end
end

-- read_evidence reads a window's evidence before the call, once: its
-- entries (body) and how many (have). redis.pcall: GET on a value of
-- another type raises WRONGTYPE, which would fail the batch on every retry;
-- such a value is none, and is replaced.
local function read_evidence(e)
  if not e.body then
    local old = pcall('GET', e.key)
    local have = type(old) == 'string' and byte(old, 1)
    if have and have >= 1 and have <= 20 then
      e.body, e.have = sub(old, 2), have
    else
      e.body, e.have = '', 0
    end
  end
end

-- keep_entry keeps an order's entry, v its window's value after it; for a
-- crossing it adds to lists the window's evidence as of the order: the
-- call's entries up to it, newest first, then the evidence before the
-- call, at least keep of them when there were that many (the caller takes
-- the first keep).
keep_entry = function(e, v, text, crossing, lists)
  local p = find(text, '\31\31', 1, true)
  local count = e.count + 1
  e.count = count
  e.new[count] = p and sub(text, 1, p) .. format('%d', v) .. sub(text, p + 1) or text
  if crossing then
    local list, k = {}, 0
    for j = count, count - e.keep + 1, -1 do
      if j < 1 then
        break
      end
      k = k + 1
      list[k] = e.new[j]
    end
    local s = concat(list, RS) .. RS
    if k < e.keep then
      read_evidence(e)
      s = s .. e.body
    end
    lists[#lists + 1] = s
  end
end

-- write_evidence writes each window's evidence that got entries this call:
-- e.win is its window's key, e.ttl its length (seconds), e.slides whether
-- each change renews the window's TTL.
write_evidence = function()
  for _, e in pairs(kept) do
    local count, keep = e.count, e.keep
    if count > 0 then
      read_evidence(e)
      local new, c = {}, 0
      for j = count, 1, -1 do
        c = c + 1
        new[c] = e.new[j]
        if c == keep then
          break
        end
      end
      local s, have, body = concat(new, RS) .. RS, e.have, e.body
      if c < keep and have > 0 then
        if c + have > keep then
          -- The old entries past keep go: cut after the (keep - c)th RS.
          local pos = 0
          for _ = 1, keep - c do
            pos = find(body, RS, pos + 1, true)
            if not pos then
              break
            end
          end
          if pos then
            body = sub(body, 1, pos)
          end
          have = keep - c
        end
        s = s .. body
        c = c + have
      end
      s = char(c) .. s
      -- A fixed window's end stays put, and so does its evidence's; a
      -- sliding one's moves with each change, and so must its evidence's.
      local left = (have == 0 or e.slides) and call('PTTL', e.win)
      if left and left > 0 then
        call('SET', e.key, s, 'PX', left)
      elseif have > 0 then
        call('SET', e.key, s, 'KEEPTTL')
      else
        call('SET', e.key, s, 'EX', e.ttl)
      end
    end
  end
end
