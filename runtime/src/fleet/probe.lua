-- breakerbox fleet: a half-open probe lease, so that at most `half_open_calls` instances probe
-- a recovering service at once, fleet-wide.
--
-- KEYS[1]  the record `{<prefix>:<name>}`
-- KEYS[2]  its leases `{<prefix>:<name>}:probes`: a sorted set of instances by lease expiry
-- ARGV[1]  the open record's epoch the caller saw
-- ARGV[2]  how many leases at once (`half_open_calls`)
-- ARGV[3]  a lease's life in ms (`probe_timeout`)
-- ARGV[4]  the instance asking
--
-- Returns { granted (1 or 0), wait_ms }: granted, for wait_ms; or not yet, ask again in wait_ms
-- (the record's open time has not run out, or every lease is taken until then); or
-- { 0, -1 }: the record is no longer that open epoch (re-read it).
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
local ttl = tonumber(ARGV[3])
if redis.call('ZSCORE', KEYS[2], ARGV[4]) or redis.call('ZCARD', KEYS[2]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
  redis.call('PEXPIRE', KEYS[2], ttl)
  return { 1, ttl }
end
local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
return { 0, math.max(tonumber(first[2]) - now, 1) }
