-- breakerbox fleet: an instance's heartbeat for one shared breaker, with its local state of
-- that breaker, and everyone's as they stand (the fleet view, and the live set a quorum is
-- counted over, see quorum.lua).
--
-- KEYS[1]  the live instances `{<prefix>:<name>}:live`: a hash, instance ->
--          `<expiry>|<its local state>`, the expiry in server ms
-- ARGV[1]  the instance      ARGV[2]  a heartbeat's life in ms      ARGV[3]  its local state
--
-- Returns { now_ms, instance, expires_ms, state, instance, expires_ms, state, … } for every
-- live instance, this one included. An instance whose heartbeat has expired is dropped; the
-- key expires when no instance has beaten for a heartbeat's life. Redis counts five commands
-- a beat (this one, TIME, HSET, PEXPIRE, HGETALL), and an HDEL when an instance has gone.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], ARGV[1], string.format('%.0f', now + ttl) .. '|' .. ARGV[3])
redis.call('PEXPIRE', KEYS[1], ttl)
local all = redis.call('HGETALL', KEYS[1])
local out = { string.format('%.0f', now) }
local gone = {}
for i = 1, #all, 2 do
  local expiry, state = string.match(all[i + 1], '^(%d+)|(.*)$')
  if expiry and tonumber(expiry) > now then
    out[#out + 1] = all[i]
    out[#out + 1] = expiry
    out[#out + 1] = state
  else
    gone[#gone + 1] = all[i]
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
end
return out
