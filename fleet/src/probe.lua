-- breakerbox fleet: half-open probe leases, so that at most `half_open_calls` probes run
-- against a recovering service at once, fleet-wide. One lease is one probe.
--
-- KEYS[1]  the record `{<prefix>:<name>}`
-- KEYS[2]  its leases `{<prefix>:<name>}:probes`: a sorted set of `<holder>#<n>` by expiry
-- ARGV[1]  the open record's epoch the caller saw
-- ARGV[2]  how many leases at once (`half_open_calls`)
-- ARGV[3]  a lease's life in ms (`probe_timeout`)
-- ARGV[4]  the process asking (its lease holder: `<instance>@<pid>-<random>.<n>`, one per process)
-- ARGV[5]  the fewest leases worth granting (`successes`: fewer probes could not close a round)
--
-- Returns { leases (1 or more), wait_ms }: this many leases granted (every free one, or the
-- ones the caller holds already, renewed), for wait_ms; or { 0, wait_ms }: not yet, ask again
-- in wait_ms (the record's open time has not run out, or too few leases are free until then);
-- or { 0, -1 }: the record is no longer that open epoch (re-read it).
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local r = redis.call('HMGET', KEYS[1], 'epoch', 'state', 'open_until')
if r[1] ~= ARGV[1] or r[2] ~= 'open' then
  return { 0, -1 }
end
local open_until = tonumber(r[3])
if now < open_until then
  return { 0, open_until - now }
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local limit = tonumber(ARGV[2])
local ttl = tonumber(ARGV[3])
local held = {}
for n = 1, limit do
  local member = ARGV[4] .. '#' .. n
  if redis.call('ZSCORE', KEYS[2], member) then
    held[#held + 1] = member
  end
end
if #held == 0 then
  local free = limit - redis.call('ZCARD', KEYS[2])
  if free >= tonumber(ARGV[5]) then
    for n = 1, free do
      held[n] = ARGV[4] .. '#' .. n
    end
  end
end
if #held > 0 then
  for _, member in ipairs(held) do
    redis.call('ZADD', KEYS[2], now + ttl, member)
  end
  redis.call('PEXPIRE', KEYS[2], ttl)
  return { #held, ttl }
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return { 0, math.max(tonumber(first[2]) - now, 1) }
