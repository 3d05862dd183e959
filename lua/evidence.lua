-- evidence: a window's latest orders near its threshold, kept by the
-- scripts that count orders (incr_and_check, slide_and_check,
-- distinct_and_check) in the very call that counts them, so that the alert
-- of a crossing can list them. lua.go puts each section below into each of
-- them where it says --[[evidence.lua: <section>]]: straight-line code,
-- without a function or a table a window (prelude.lua says what those cost
-- a call), and none of it runs in a call without evidence.
--
-- KEYS[ev_keys+j]     the j-th window that keeps evidence: its evidence, a
--                     string, its entry count as one byte (1..20), then its
--                     entries newest first, each ending with RS (\30)
-- ARGV[ev_args+3j-3]  its window's index (1..n, each at most once); how
--                     many entries it keeps (1..20); the value from which
--                     it keeps them (its threshold less its evidence, or
--                     half of it)
--
-- An entry is the order's text as the caller sent it, 'time US amount US
-- US event id US order id US value' (US \31), with the window's value after
-- the order put between the two US's, which only the script knows; a text
-- without them is kept as it came, and its reader drops it. A text over 512
-- bytes, or holding RS, is not kept (the change counts all the same), and
-- a crossing's list is then ''. A
-- window's evidence is read at most once a call (GET) and written once
-- (SET), its new entries first and then as many of the old as keep leaves
-- room for; a new one, and a sliding window's at every write, takes the
-- window's remaining life (PTTL, after the call's writes to the window),
-- else it keeps its own; without a TTL on the window, the window's
-- lifetime. A value not of this form (written by another), of any type, is
-- replaced. Entries are not checked for repeats: a redelivered order is
-- kept again, and the reader drops repeats. Why a string and not a list:
-- docs/design.md.
--[[windows]]
-- The windows that keep evidence, by index: keep, from, key; each one's
-- entries of the call (ev_new, made with the first), and its evidence
-- before the call (ev_old, ev_have) once read. In: n, m, ev_args, ev_keys.
-- ev_keep stays nil when an argument is unusable: the call is refused. A
-- call's windows mostly share a rule's keep and from: each string is
-- checked once in a row.
if #ARGV >= ev_args + 3 * m - 1 then
  ev_keep, ev_from, ev_key = {}, {}, {}
  local ks_seen, keep, fs_seen, from
  for j = 1, m do
    local a = ev_args + 3 * j - 3
    local is, ks, fs = ARGV[a], ARGV[a + 1], ARGV[a + 2]
    local i = #is <= 2 and match(is, DIGITS) and tonumber(is)
    if ks ~= ks_seen then
      ks_seen, keep = ks, #ks <= 2 and match(ks, DIGITS) and tonumber(ks)
    end
    if fs ~= fs_seen then
      fs_seen, from = fs, #fs <= 18 and match(fs, DIGITS) and tonumber(fs)
    end
    if not (i and i <= n and not ev_keep[i] and keep and keep <= 20 and from) then
      ev_keep = nil
      break
    end
    ev_keep[i], ev_from[i], ev_key[i] = keep, from, KEYS[ev_keys + j]
  end
end
--[[keep]]
-- An order's entry, kept: in i (its window), keep (ev_keep[i]), v (the
-- window's value after it), crossing, text. A crossing adds to lists its
-- window's evidence as of itself: the call's entries up to it, newest
-- first, then the evidence before the call, at least keep of them when
-- there were that many (the caller takes the first keep).
if #text <= 512 and not find(text, RS, 1, true) then
  if not ev_new then
    ev_new, ev_old, ev_have, lists = {}, {}, {}, {}
  end
  local p, new = find(text, '\31\31', 1, true), ev_new[i]
  if not new then
    new = {}
    ev_new[i] = new
  end
  local count = #new + 1
  new[count] = p and sub(text, 1, p) .. format('%d', v) .. sub(text, p + 1) or text
  if crossing then
    local list, k = {}, 0
    for j = count, count - keep + 1, -1 do
      if j < 1 then
        break
      end
      k = k + 1
      list[k] = new[j]
    end
    local s = table.concat(list, RS) .. RS
    if k < keep then
      if not ev_old[i] then
        -- redis.pcall: GET on a value of another type raises WRONGTYPE,
        -- which would fail the batch on every retry; such a value is
        -- none, and is replaced.
        local old = pcall('GET', ev_key[i])
        local have = type(old) == 'string' and string.byte(old, 1)
        if have and have >= 1 and have <= 20 then
          ev_old[i], ev_have[i] = sub(old, 2), have
        else
          ev_old[i], ev_have[i] = '', 0
        end
      end
      s = s .. ev_old[i]
    end
    lists[#lists + 1] = s
  end
elseif crossing then
  -- Its list is '': the alert goes without evidence, as it goes.
  if not ev_new then
    ev_new, ev_old, ev_have, lists = {}, {}, {}, {}
  end
  lists[#lists + 1] = ''
end
--[[write]]
-- A window's evidence written, after the call's writes to the window: in
-- i, new (its entries of the call, oldest first), win (the window's key),
-- ttl (its lifetime, seconds), slides (each change renews its TTL).
local keep, count = ev_keep[i], #new
if not ev_old[i] then
  local old = pcall('GET', ev_key[i])
  local have = type(old) == 'string' and string.byte(old, 1)
  if have and have >= 1 and have <= 20 then
    ev_old[i], ev_have[i] = sub(old, 2), have
  else
    ev_old[i], ev_have[i] = '', 0
  end
end
local list, c = {}, 0
for j = count, 1, -1 do
  c = c + 1
  list[c] = new[j]
  if c == keep then
    break
  end
end
local s, have, body = table.concat(list, RS) .. RS, ev_have[i], ev_old[i]
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
s = string.char(c) .. s
-- A fixed window's end stays put, and so does its evidence's; a sliding
-- one's moves with each change, and so must its evidence's.
local left = (have == 0 or slides) and call('PTTL', win)
if left and left > 0 then
  call('SET', ev_key[i], s, 'PX', left)
elseif have > 0 then
  call('SET', ev_key[i], s, 'KEEPTTL')
else
  call('SET', ev_key[i], s, 'EX', ttl)
end
