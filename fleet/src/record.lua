-- breakerbox fleet: the one script that reads and changes a shared breaker's record.
--
-- KEYS[1]  the record, a hash: `{<prefix>:<name>}`
-- KEYS[2]  optional: its probe leases, `{<prefix>:<name>}:probes` (see probe.lua), dropped on a write
-- ARGV[1]  mode: `read`, `cas` (change only if the record's epoch is ARGV[2]; 0 = no record),
--          or `force` (change whatever the record holds: manual control)
-- ARGV[2]  the epoch the caller last saw (`cas`)
-- ARGV[3]  the new state: closed | open | forced_open | disabled
-- ARGV[4]  while open: for how many milliseconds, from the server's TIME
-- ARGV[5]  re-opens since the last close (the backoff level)
-- ARGV[6]  the reason, as text
-- ARGV[7]  the failure that tripped it, as text ('' for none)
-- ARGV[8]  the instance the change comes from
-- ARGV[9]  the channel to PUBLISH the new record on
-- ARGV[10] the breaker's name (the payload's first field)
-- For a keyed family's key (optional, written only with a change):
-- KEYS[3]  the family's open keys, a sorted set of key texts by the expiry of their record
--          (server ms; `inf` while it does not expire)
-- ARGV[11] the record's life in ms from this write (0: for ever, until a later write)
-- ARGV[12] the key's text
--
-- Returns { changed (1 or 0), epoch, state, open_until_ms, now_ms, reopens, origin, reason,
-- last_failure }: the record as it is after the call (epoch 0 and state `closed` if there is
-- none), and the server's time. Every change is published as the same fields, each written
-- `<length>:<bytes>`, after the name.
local key = KEYS[1]
local mode = ARGV[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function num(x)
  return string.format('%.0f', x)
end
local function current()
  local r = redis.call('HMGET', key, 'epoch', 'state', 'open_until', 'reopens', 'origin', 'reason', 'last_failure')
  if not r[1] then
    return { 0, '0', 'closed', '0', num(now), '0', '', '', '' }
  end
  return { 0, r[1], r[2] or 'closed', r[3] or '0', num(now), r[4] or '0', r[5] or '', r[6] or '', r[7] or '' }
end
local cur = current()
if mode == 'read' then
  return cur
end
if mode == 'cas' and cur[2] ~= ARGV[2] then
  return cur
end
local epoch = math.max(tonumber(cur[2]) + 1, now)
local state = ARGV[3]
local open_until = 0
if state == 'open' then
  open_until = now + tonumber(ARGV[4])
end
local rec = { 1, num(epoch), state, num(open_until), num(now), ARGV[5], ARGV[8], ARGV[6], ARGV[7] }
redis.call('HSET', key, 'epoch', rec[2], 'state', rec[3], 'open_until', rec[4], 'reopens', rec[6],
  'origin', rec[7], 'reason', rec[8], 'last_failure', rec[9], 'changed_at', rec[5])
local payload = string.len(ARGV[10]) .. ':' .. ARGV[10]
for i = 2, 9 do
  payload = payload .. string.len(rec[i]) .. ':' .. rec[i]
end
-- A family key's record expires, and its family's open keys list it while it is not closed.
if ARGV[11] then
  local ttl = tonumber(ARGV[11])
  if ttl > 0 then
    redis.call('PEXPIRE', key, ARGV[11])
  else
    redis.call('PERSIST', key)
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', num(now))
  if state == 'closed' then
    redis.call('ZREM', KEYS[3], ARGV[12])
  elseif ttl > 0 then
    redis.call('ZADD', KEYS[3], num(now + ttl), ARGV[12])
  else
    redis.call('ZADD', KEYS[3], '+inf', ARGV[12])
  end
end
-- A new record ends the probe leases of the last one (KEYS[2], when given).
if KEYS[2] then
  redis.call('DEL', KEYS[2])
end
redis.call('PUBLISH', ARGV[9], payload)
return rec
