-- breakerbox fleet: the fleet's counts of a failure-rate breaker over a time window, and a trip
-- when the fleet's rate reaches the limit (for services where no instance alone sees
-- `min_calls`).
--
-- KEYS[1]  the record `{<prefix>:<name>}`
-- KEYS[2]  the counts `{<prefix>:<name>}:counts`: a hash of `<bucket>:c` (calls) and
--          `<bucket>:f` (failures), bucket = server ms / bucket length
-- ARGV[1]  calls since the caller's last batch      ARGV[2]  failures since then
-- ARGV[3]  the window in ms                         ARGV[4]  the bucket length in ms
-- ARGV[5]  min_calls                                ARGV[6]  failure_rate (percent)
-- ARGV[7]  open time in ms, if it trips             ARGV[8]  the instance
-- ARGV[9]  the channel                              ARGV[10] the breaker's name
-- ARGV[11] the epoch of the record the caller had taken on when it judged these calls
--
-- The counts belong to one record: the hash keeps that record's epoch (field `epoch`), and a
-- record written since (a trip, a close, a reset, any write, from any instance or redis-cli)
-- starts the window empty. A batch judged under another record than the current one is
-- dropped: calls made before a reset never count after it.
--
-- Returns { tripped (1 or 0), calls, failures } of the window ({ 0, 0, 0 } for a dropped
-- batch). A trip is written as record.lua writes one (only over a closed record), published
-- the same way.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local len = tonumber(ARGV[4])
local bucket = math.floor(now / len)
local first = bucket - math.floor(tonumber(ARGV[3]) / len) + 1
local function num(x)
  return string.format('%.0f', x)
end
local r = redis.call('HMGET', KEYS[1], 'epoch', 'state')
local epoch_now = r[1] or '0'
-- One read of the counts: the record they belong to, the window's sums, this bucket's own
-- counts, and the buckets that have left the window.
local all = redis.call('HGETALL', KEYS[2])
local under, calls, failures, here_c, here_f, stale = nil, 0, 0, 0, 0, {}
for i = 1, #all, 2 do
  if all[i] == 'epoch' then
    under = all[i + 1]
  else
    local b, kind = string.match(all[i], '^(%d+):(%a)$')
    local n = tonumber(all[i + 1])
    if b and tonumber(b) < first then
      stale[#stale + 1] = all[i]
    elseif kind == 'c' then
      calls = calls + n
      if tonumber(b) == bucket then here_c = n end
    elseif kind == 'f' then
      failures = failures + n
      if tonumber(b) == bucket then here_f = n end
    end
  end
end
if under ~= epoch_now then
  -- Counted under an older record: the window starts empty.
  if #all > 0 then
    redis.call('DEL', KEYS[2])
  end
  calls, failures, here_c, here_f, stale = 0, 0, 0, 0, {}
end
if ARGV[11] ~= epoch_now then
  return { 0, 0, 0 }
end
if #stale > 0 then
  redis.call('HDEL', KEYS[2], unpack(stale))
end
local add_c, add_f = tonumber(ARGV[1]), tonumber(ARGV[2])
if add_c > 0 then
  redis.call('HSET', KEYS[2], num(bucket) .. ':c', num(here_c + add_c),
    num(bucket) .. ':f', num(here_f + add_f), 'epoch', epoch_now)
  if here_c == 0 then
    -- A new bucket: the counts live until it has left the window.
    redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[3]) + len)
  end
  calls = calls + add_c
  failures = failures + add_f
end
if calls < tonumber(ARGV[5]) or failures * 100 < tonumber(ARGV[6]) * calls then
  return { 0, calls, failures }
end
if r[2] and r[2] ~= 'closed' then
  return { 0, calls, failures }
end
local cur = tonumber(r[1] or '0')
local epoch = math.max(cur + 1, now)
local rate = math.floor(failures * 100 / calls)
local reason = 'fleet failure rate ' .. rate .. '%'
local rec = { num(epoch), 'open', num(now + tonumber(ARGV[7])), num(now), '0', ARGV[8], reason, '' }
redis.call('HSET', KEYS[1], 'epoch', rec[1], 'state', 'open', 'open_until', rec[3], 'reopens', '0',
  'origin', ARGV[8], 'reason', reason, 'last_failure', '', 'changed_at', rec[4])
redis.call('DEL', KEYS[2])
local payload = string.len(ARGV[10]) .. ':' .. ARGV[10]
for i = 1, 8 do
  payload = payload .. string.len(rec[i]) .. ':' .. rec[i]
end
redis.call('PUBLISH', ARGV[9], payload)
return { 1, calls, failures }
