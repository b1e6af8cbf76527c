-- breakerbox fleet: an instance's heartbeat, one for every breaker it shares, with the breakers
-- it holds other than closed, and everyone's as they stand (the fleet view, and the live set a
-- quorum is counted over, see quorum.lua). Sent only by an instance that shares a breaker under
-- a quorum: a fleet without one sends none.
--
-- KEYS[1]  the live instances `{<prefix>:}:live`: a hash, instance -> `<expiry>|<states>`, the
--          expiry in server ms, the states `<len>:<breaker><len>:<state>` for each breaker the
--          instance holds other than closed (so a beat grows with open breakers, not shared ones)
-- ARGV[1]  the instance      ARGV[2]  a heartbeat's life in ms      ARGV[3]  its states
--
-- Returns { now_ms, instance, expires_ms, states, instance, expires_ms, states, … } for every
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
  local expiry, states = string.match(all[i + 1], '^(%d+)|(.*)$')
  if expiry and tonumber(expiry) > now then
    out[#out + 1] = all[i]
    out[#out + 1] = expiry
    out[#out + 1] = states
  else
    gone[#gone + 1] = all[i]
  end
end
if #gone > 0 then
  redis.call('HDEL', KEYS[1], unpack(gone))
end
return out
