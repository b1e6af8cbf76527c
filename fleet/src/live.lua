-- breakerbox fleet: an instance's heartbeat for one shared breaker, with its local state of
-- that breaker, and everyone's as they stand (the fleet view, and the live set a quorum is
-- counted over, see quorum.lua).
--
-- KEYS[1]  the live instances `{<prefix>:<name>}:live`: a sorted set of instances by the
--          expiry of their heartbeat, in server ms
-- KEYS[2]  their reports `{<prefix>:<name>}:report`: a hash, instance -> its local state
-- ARGV[1]  the instance      ARGV[2]  a heartbeat's life in ms      ARGV[3]  its local state
--
-- Returns { now_ms, instance, expires_ms, state, instance, expires_ms, state, … } for every
-- live instance, this one included. An instance whose heartbeat has expired is dropped with its
-- report; both keys expire when no instance has beaten for a heartbeat's life.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('PEXPIRE', KEYS[2], ttl)
local live = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
local alive = {}
local out = { string.format('%.0f', now) }
for i = 1, #live, 2 do
  alive[live[i]] = true
end
local reports = redis.call('HGETALL', KEYS[2])
local gone = {}
local state = {}
for i = 1, #reports, 2 do
  if alive[reports[i]] then
    state[reports[i]] = reports[i + 1]
  else
    gone[#gone + 1] = reports[i]
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[2], unpack(gone))
end
for i = 1, #live, 2 do
  out[#out + 1] = live[i]
  out[#out + 1] = live[i + 1]
  out[#out + 1] = state[live[i]] or ''
end
return out
