-- breakerbox fleet: the fleet's counts of a failure-rate breaker over a time window, and a trip
-- when the fleet's rate reaches the limit (for services where no instance alone sees
-- `min_calls`).
--
-- KEYS[1]  the record `{<prefix>:<name>}`. The counts live in it, beside the record's fields:
--          `<bucket>:c` (calls) and `<bucket>:f` (failures), bucket = server ms / bucket
--          length, and `counts_epoch`, the epoch of the record they were counted under.
-- ARGV[1]  calls since the caller's last batch      ARGV[2]  failures since then
-- ARGV[3]  the window in ms                         ARGV[4]  the bucket length in ms
-- ARGV[5]  min_calls                                ARGV[6]  failure_rate (percent)
-- ARGV[7]  open time in ms, if it trips             ARGV[8]  the instance
-- ARGV[9]  the channel                              ARGV[10] the breaker's name
-- ARGV[11] the epoch of the record the caller had taken on when it judged these calls
--
-- The counts belong to one record: a record written since they were counted (a trip, a close,
-- a reset, any write, from any instance or redis-cli) changes `epoch` and so leaves
-- `counts_epoch` behind, and its window starts empty; nothing but this script has to know about
-- the counts. A batch judged under another record than the current one is dropped: calls made
-- before a reset never count after it.
--
-- A batch costs Redis four commands (this one, TIME, HGETALL, HSET), and an HDEL when a bucket
-- has left the window or the record has changed; a trip adds HSET, HDEL and PUBLISH.
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
-- One read: the record's epoch and state, the counts and the record they belong to.
local all = redis.call('HGETALL', KEYS[1])
local epoch_now, state, under = '0', nil, nil
local fields, buckets, values = {}, {}, {}
for i = 1, #all, 2 do
  local f = all[i]
  if f == 'epoch' then
    epoch_now = all[i + 1]
  elseif f == 'state' then
    state = all[i + 1]
  elseif f == 'counts_epoch' then
    under = all[i + 1]
  else
    local b = string.match(f, '^(%d+):[cf]$')
    if b then
      fields[#fields + 1] = f
      buckets[#buckets + 1] = tonumber(b)
      values[#values + 1] = tonumber(all[i + 1])
    end
  end
end
-- Counted under an older record: all of it goes, the window starts empty. Else the buckets
-- that have left the window go.
local drop, calls, failures, here_c, here_f = {}, 0, 0, 0, 0
for i = 1, #fields do
  local f = fields[i]
  if under ~= epoch_now or buckets[i] < first then
    drop[#drop + 1] = f
  elseif string.sub(f, -1) == 'c' then
    calls = calls + values[i]
    if buckets[i] == bucket then here_c = values[i] end
  else
    failures = failures + values[i]
    if buckets[i] == bucket then here_f = values[i] end
  end
end
if #drop > 0 then
  redis.call('HDEL', KEYS[1], unpack(drop))
end
if ARGV[11] ~= epoch_now then
  return { 0, 0, 0 }
end
local add_c, add_f = tonumber(ARGV[1]), tonumber(ARGV[2])
if add_c > 0 then
  redis.call('HSET', KEYS[1], num(bucket) .. ':c', num(here_c + add_c),
    num(bucket) .. ':f', num(here_f + add_f), 'counts_epoch', epoch_now)
  calls = calls + add_c
  failures = failures + add_f
end
if calls < tonumber(ARGV[5]) or failures * 100 < tonumber(ARGV[6]) * calls then
  return { 0, calls, failures }
end
if state and state ~= 'closed' then
  return { 0, calls, failures }
end
local epoch = math.max(tonumber(epoch_now) + 1, now)
local rate = math.floor(failures * 100 / calls)
local reason = 'fleet failure rate ' .. rate .. '%'
local rec = { num(epoch), 'open', num(now + tonumber(ARGV[7])), num(now), '0', ARGV[8], reason, '' }
redis.call('HSET', KEYS[1], 'epoch', rec[1], 'state', 'open', 'open_until', rec[3], 'reopens', '0',
  'origin', ARGV[8], 'reason', reason, 'last_failure', '', 'changed_at', rec[4])
-- The window's counts belong to the record that ended.
local gone = { 'counts_epoch', num(bucket) .. ':c', num(bucket) .. ':f' }
for i = 1, #fields do
  if buckets[i] ~= bucket then gone[#gone + 1] = fields[i] end
end
redis.call('HDEL', KEYS[1], unpack(gone))
local payload = string.len(ARGV[10]) .. ':' .. ARGV[10]
for i = 1, 8 do
  payload = payload .. string.len(rec[i]) .. ':' .. rec[i]
end
redis.call('PUBLISH', ARGV[9], payload)
return { 1, calls, failures }
