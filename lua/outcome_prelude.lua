-- outcome_prelude: what the outcome scripts share, prepended to
-- outcome_open, outcome_record and outcome_label (outcomes.go; the same
-- text is in each script's SHA1). Their keys are all in one slot,
-- {outcomes} (Keys.Outcomes), so that one call updates an order and every
-- alert that lists it.
--
-- An alert's record is a hash: ref (its alert.Ref, JSON), rule, opened
-- (milliseconds since 1970), its own label (label, labelled_by,
-- labelled_at: a click, the CLI), outcome (derived, below; absent: none),
-- outcome_at (when it first had one), and a field o:<order id> for each
-- order it lists, holding that order's label ('' for none).
local LABELS = {fraud = true, legit = true, unclear = true}
local DIGITS = '^[1-9]%d*$'

-- now is Redis's clock in milliseconds: every replica's writes compare.
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- kind is key's type; a key of another type than want (written by
-- another) goes, and is none.
local function kind(key, want)
  local t = redis.call('TYPE', key)['ok']
  if t ~= want and t ~= 'none' then
    redis.call('DEL', key)
    return 'none'
  end
  return t
end

-- settle derives the outcome of the alert whose record is key (of id) and
-- writes it: its own label wins; else fraud when an order it lists is
-- fraud, legit when those that carry an outcome are all legit, unclear
-- when one is not; none when none does. When it changed, it appends to
-- out the alert's id, rule, previous and new outcome, and the milliseconds
-- from its opening to its first outcome (-1 when it had one before).
local function settle(key, id, out, at)
  local f = redis.call('HGETALL', key)
  local own, fraud, any, legit = nil, false, false, true
  local prev, rule, opened, first = '', '', 0, true
  for i = 1, #f, 2 do
    local name, v = f[i], f[i + 1]
    if string.sub(name, 1, 2) == 'o:' then
      if LABELS[v] then
        any = true
        fraud = fraud or v == 'fraud'
        legit = legit and v == 'legit'
      end
    elseif name == 'label' and LABELS[v] then
      own = v
    elseif name == 'outcome' then
      prev = v
    elseif name == 'rule' then
      rule = v
    elseif name == 'opened' then
      opened = tonumber(v) or 0
    elseif name == 'outcome_at' then
      first = false
    end
  end
  local new = own or (fraud and 'fraud') or (any and (legit and 'legit' or 'unclear')) or ''
  if new == prev then
    return
  end
  local elapsed = -1
  if new == '' then
    redis.call('HDEL', key, 'outcome')
  else
    redis.call('HSET', key, 'outcome', new)
    if first then
      redis.call('HSET', key, 'outcome_at', tostring(at))
      elapsed = math.max(0, at - opened)
    end
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, rule, prev, new, elapsed
end
