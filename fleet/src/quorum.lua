-- breakerbox fleet: a local trip under a quorum (`fleet_trip = "quorum"`). The instance's own
-- breaker is open already; this reports it, and opens the fleet's record only once the open
-- reports of live instances reach the quorum.
--
-- KEYS[1]  the record `{<prefix>:<name>}`
-- KEYS[2]  its probe leases `{<prefix>:<name>}:probes` (dropped when the record is written)
-- KEYS[3]  the open reports `{<prefix>:<name>}:opens`: a sorted set of `<epoch>|<instance>` by
--          the end of that instance's open time, in server ms. A report counts only for the
--          record epoch it names: any write of the record (a reset, a close, a trip, redis-cli)
--          leaves the reports before it behind.
-- ARGV[1]  the record epoch the caller last saw (0: none)
-- ARGV[2]  the caller's open time left, in ms        ARGV[3]  its re-opens
-- ARGV[4]  the reason                                ARGV[5]  the failure that tripped it
-- ARGV[6]  the instance                              ARGV[7]  the channel
-- ARGV[8]  the breaker's name
-- ARGV[9]  the quorum: `<n>` instances, or `<p>%` of the live ones (rounded up); never more
--          than the live instances, never less than one
-- ARGV[10] how many live instances follow: ARGV[11], ARGV[12] the first one's name and the
--          expiry of its heartbeat (server ms), and so on, as the caller's own heartbeat has
--          just read them (`{<prefix>:}:live`, heartbeat.lua: a key of its own, on another
--          Cluster slot than this breaker's, so the caller reads it and passes it on). An
--          instance is live while its expiry is in the future; the caller is live.
-- For a keyed family's key (optional), after the live instances (n of them):
-- KEYS[4]       the family's open keys (see record.lua)
-- ARGV[11 + 2n] the record's life in ms once opened     ARGV[12 + 2n] the key's text
--
-- Returns { changed, epoch, state, open_until_ms, now_ms, reopens, origin, reason,
-- last_failure, reported, open, needed, live }: the record as record.lua returns it (changed 1:
-- this report opened it), then whether the report was taken (0: the record is not the closed
-- epoch the caller saw, so it takes that record on instead), and the tally: open reports of
-- live instances, the quorum among the live ones, how many are live.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local function num(x)
  return string.format('%.0f', x)
end
local r = redis.call('HMGET', KEYS[1], 'epoch', 'state', 'open_until', 'reopens', 'origin', 'reason', 'last_failure')
local epoch_now = r[1] or '0'
local state = r[2] or 'closed'
local cur = { 0, epoch_now, state, r[3] or '0', num(now), r[4] or '0', r[5] or '', r[6] or '', r[7] or '' }
if not r[1] then
  cur = { 0, '0', 'closed', '0', num(now), '0', '', '', '' }
end
if epoch_now ~= ARGV[1] or state ~= 'closed' then
  cur[10], cur[11], cur[12], cur[13] = 0, 0, 0, 0
  return cur
end
-- The live set: the instances whose beat has not expired, and the caller.
local alive = { [ARGV[6]] = true }
local live = 1
for i = 1, tonumber(ARGV[10]) do
  local name, expiry = ARGV[9 + 2 * i], tonumber(ARGV[10 + 2 * i])
  if name ~= ARGV[6] and not alive[name] and expiry and expiry > now then
    alive[name] = true
    live = live + 1
  end
end
-- The caller's report, and the reports whose open time has passed dropped.
local mark = epoch_now .. '|'
redis.call('ZADD', KEYS[3], now + tonumber(ARGV[2]), mark .. ARGV[6])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local open = 0
local reports = redis.call('ZRANGE', KEYS[3], 0, -1)
for _, m in ipairs(reports) do
  if string.sub(m, 1, #mark) == mark and alive[string.sub(m, #mark + 1)] then
    open = open + 1
  end
end
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', KEYS[3], math.max(tonumber(last[2]) - now, 1))
local q = ARGV[9]
local needed
if string.sub(q, -1) == '%' then
  needed = math.ceil(tonumber(string.sub(q, 1, -2)) * live / 100)
else
  needed = math.min(tonumber(q), live)
end
needed = math.max(needed, 1)
if open < needed then
  cur[10], cur[11], cur[12], cur[13] = 1, open, needed, live
  return cur
end
local epoch = math.max(tonumber(epoch_now) + 1, now)
local reason = 'quorum: ' .. open .. ' of ' .. live .. ' instances open (' .. ARGV[4] .. ')'
local rec = { 1, num(epoch), 'open', num(now + tonumber(ARGV[2])), num(now), ARGV[3], ARGV[6], reason, ARGV[5] }
redis.call('HSET', KEYS[1], 'epoch', rec[2], 'state', 'open', 'open_until', rec[4], 'reopens', rec[6],
  'origin', rec[7], 'reason', rec[8], 'last_failure', rec[9], 'changed_at', rec[5])
redis.call('DEL', KEYS[2], KEYS[3])
local life = ARGV[11 + 2 * tonumber(ARGV[10])]
if KEYS[4] and life then
  redis.call('PEXPIRE', KEYS[1], life)
  redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', num(now))
  redis.call('ZADD', KEYS[4], num(now + tonumber(life)), ARGV[12 + 2 * tonumber(ARGV[10])])
end
local payload = string.len(ARGV[8]) .. ':' .. ARGV[8]
for i = 2, 9 do
  payload = payload .. string.len(rec[i]) .. ':' .. rec[i]
end
redis.call('PUBLISH', ARGV[7], payload)
rec[10], rec[11], rec[12], rec[13] = 1, open, needed, live
return rec
