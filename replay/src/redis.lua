-- The fleet journal's operations (replay/src/redis.rs), one script: each call runs atomically
-- on the server, so the instances of a fleet never see a half-done operation.
--
-- KEYS[1] the stream of queued entries, ids `<n>-0` (n counts up from 1), each with the fields
--         t (journaled at, ns on the journal's clock), b (bytes), a (arguments), k (its key,
--         if it has one); the consumer group `breakerbox` on it
-- KEYS[2] the dead letters: a stream of the same fields, and i (the entry's n) and
--         n (attempts)
-- KEYS[3] hash: key -> n of the queued entry of that key
-- KEYS[4] hash: n -> "attempts next_try_ns", for entries whose replay failed
-- KEYS[5] sorted set: n of the entries a replay holds, scored by when it took them (ms on the
--         journal's clock)
-- KEYS[6] hash: the fleet's counts, `bytes` of the queued entries, `seq`, and `keys`, the
--         number of fields KEYS[3] holds (KEYS[3] gone while it is above 0 was lost: rebuilt)
--
-- In the group, an entry is either undelivered (newer than the group's last delivered id), or
-- pending on the consumer `__queue` (delivered once, no replay holds it), or pending on one
-- instance's consumer, whose replay holds it (and it is in KEYS[5]). Every entry pending on
-- an instance's consumer is in KEYS[5]; one held longer than claim_after goes back to
-- `__queue`, so an instance that died leaves its entries to the others.
--
-- ARGV[1] names the operation; times are decimal nanoseconds (or ms for leases).

local S, D, K, T, Z, C = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local G = 'breakerbox'
local QUEUE = '__queue'
local ORDER = {'queued', 'deduplicated', 'replayed', 'failed', 'dead_lettered', 'expired', 'dropped', 'refused'}
local op = ARGV[1]

-- What this call changed, returned after its result so that each instance reports its own
-- events as metrics.
local delta = {}
local function count(field, by)
  if by ~= 0 then
    redis.call('HINCRBY', C, field, by)
    delta[field] = (delta[field] or 0) + by
  end
end
local function reply(t)
  for _, f in ipairs(ORDER) do
    t[#t + 1] = delta[f] or 0
  end
  return t
end

local function fields(flat)
  local f = {}
  for i = 1, #flat, 2 do
    f[flat[i]] = flat[i + 1]
  end
  return f
end
local function sid(n) return n .. '-0' end
local function num(id) return string.match(id, '^(%d+)') end
local function entry(n)
  local r = redis.call('XRANGE', S, sid(n), sid(n))
  if #r == 0 then return nil end
  return fields(r[1][2])
end
local function tries(n)
  local v = redis.call('HGET', T, n)
  if not v then return 0, nil end
  local a, nx = string.match(v, '^(%d+) (%d+)$')
  return tonumber(a), nx
end
local function keyed(f) if f.k then return {'1', f.k} end return {'0', ''} end

-- The keys of the stream's entries, written again from the stream: the keys' hash lost
-- (evicted, deleted) would let a call with a queued key be journaled twice.
local function rebuild_keys()
  redis.call('DEL', K)
  local keys = 0
  for _, e in ipairs(redis.call('XRANGE', S, '-', '+')) do
    local f = fields(e[2])
    if f.k then keys = keys + redis.call('HSET', K, f.k, num(e[1])) end
  end
  redis.call('HSET', C, 'keys', keys)
end

-- The stream and its group, made if missing; a key of another kind is the caller's error.
-- The counts' `bytes` weigh the stream's entries: a stream made anew holds none, and counts
-- lost (evicted, deleted) are weighed again from the stream, so that neither loss lets the
-- stream past max_bytes nor keeps it full of entries it no longer holds. The keys' hash is
-- written again from the stream when it is gone while the counts say it holds keys (or the
-- counts were lost).
local function ensure()
  local kind = redis.call('TYPE', S)['ok']
  if kind ~= 'stream' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE the journal stream ' .. S .. ' holds a ' .. kind)
  end
  local made = redis.pcall('XGROUP', 'CREATE', S, G, '0', 'MKSTREAM')
  if type(made) == 'table' and made['err'] and not string.find(made['err'], 'BUSYGROUP') then
    return made
  end
  if kind == 'none' then
    redis.call('HSET', C, 'bytes', 0)
  elseif not redis.call('HGET', C, 'bytes') then
    local weighed = 0
    for _, e in ipairs(redis.call('XRANGE', S, '-', '+')) do
      weighed = weighed + tonumber(fields(e[2]).b)
    end
    redis.call('HSET', C, 'bytes', weighed)
  end
  local keys = tonumber(redis.call('HGET', C, 'keys'))
  if not keys or (keys > 0 and redis.call('TYPE', K)['ok'] == 'none') then
    rebuild_keys()
  end
  return nil
end

-- A queued entry gone (replayed, expired, dropped, dead): its key, tries, lease and bytes.
local function remove(n, f)
  redis.call('XACK', S, G, sid(n))
  redis.call('XDEL', S, sid(n))
  redis.call('ZREM', Z, n)
  redis.call('HDEL', T, n)
  if f.k and redis.call('HGET', K, f.k) == n then
    redis.call('HDEL', K, f.k)
    redis.call('HINCRBY', C, 'keys', -1)
  end
  count('bytes', -tonumber(f.b))
end

-- The expired entries at the front of the stream, those a replay holds aside.
local function expire(now, ttl)
  for _, e in ipairs(redis.call('XRANGE', S, '-', '+', 'COUNT', 100)) do
    local f = fields(e[2])
    if tonumber(f.t) + ttl > now then break end
    local n = num(e[1])
    if not redis.call('ZSCORE', Z, n) then
      remove(n, f)
      count('expired', 1)
    end
  end
end

local function add(n, t, b, a, has_key, key)
  local cmd = {'XADD', S, sid(n), 't', t, 'b', b, 'a', a}
  if has_key then
    cmd[#cmd + 1] = 'k'
    cmd[#cmd + 1] = key
    redis.call('HINCRBY', C, 'keys', redis.call('HSET', K, key, n))
  end
  redis.call(unpack(cmd))
  count('bytes', tonumber(b))
end

-- The next entry's n, above `floor` (the highest n the calling instance has seen). Counted in
-- the counts' `seq`; when that starts over (the journal is new, or its counts were lost), it
-- goes on after the stream's last id and every held n, which a new id must pass: an id is
-- never given again while a replay may still hold it (the stream lost too, say), so that the
-- end of an old replay never settles a new entry.
local function next_n(floor)
  local n = redis.call('HINCRBY', C, 'seq', 1)
  local least = tonumber(floor) or 0
  if n == 1 then
    local info = redis.call('XINFO', 'STREAM', S)
    for i = 1, #info, 2 do
      if info[i] == 'last-generated-id' then
        least = math.max(least, tonumber(num(info[i + 1])) or 0)
      end
    end
    for _, held in ipairs(redis.call('ZRANGE', Z, 0, -1)) do
      least = math.max(least, tonumber(held) or 0)
    end
  end
  if n <= least then
    n = least + 1
    redis.call('HSET', C, 'seq', n)
  end
  return n
end

local function queued_key(key)
  local n = redis.call('HGET', K, key)
  if n and entry(n) then return n end
  return nil
end

local function bytes() return tonumber(redis.call('HGET', C, 'bytes') or '0') end

-- A push carries, last, the moment (µs on this server's clock) after which its caller no longer
-- waits for the answer: run later (the server was stopped, or the command waited in a socket),
-- it journals nothing, so that no call is journaled behind a caller told it was not.
if op == 'push' then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000000 + tonumber(t[2]) > tonumber(ARGV[12]) then
    return reply({'late'})
  end
end

local failed = ensure()
if failed then return failed end

if op == 'push' then
  -- now ttl has_key key args bytes max_entries max_bytes drop_oldest floor deadline_us
  local now, ttl = tonumber(ARGV[2]), tonumber(ARGV[3])
  local has_key, key, args, b = ARGV[4] == '1', ARGV[5], ARGV[6], tonumber(ARGV[7])
  local max_entries, max_bytes, drop = tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10] == '1'
  expire(now, ttl)
  if has_key then
    local n = queued_key(key)
    if n then
      count('deduplicated', 1)
      return reply({'duplicate', n})
    end
  end
  if b > max_bytes then
    count('refused', 1)
    return reply({'too_large'})
  end
  while redis.call('XLEN', S) >= max_entries or bytes() + b > max_bytes do
    local victim = nil
    if drop then
      for _, e in ipairs(redis.call('XRANGE', S, '-', '+', 'COUNT', 100)) do
        if not redis.call('ZSCORE', Z, num(e[1])) then
          victim = e
          break
        end
      end
    end
    if not victim then
      count('refused', 1)
      return reply({'full'})
    end
    remove(num(victim[1]), fields(victim[2]))
    count('dropped', 1)
  end
  local n = next_n(ARGV[11])
  add(n, ARGV[2], ARGV[7], args, has_key, key)
  count('queued', 1)
  return reply({'new', n})
elseif op == 'take' then
  -- now ttl consumer now_ms claim_after_ms
  local now, ttl, me = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
  local now_ms, claim_ms = tonumber(ARGV[5]), tonumber(ARGV[6])
  expire(now, ttl)
  -- Every entry pending on an instance's consumer is in the held set; one that is not (the set
  -- was lost: evicted, deleted) is held from now, so that it goes back to the queue
  -- claim_after from now if its instance died holding it.
  local consumers = redis.call('XPENDING', S, G)[4]
  if type(consumers) == 'table' then
    for _, c in ipairs(consumers) do
      if c[1] ~= QUEUE then
        for _, p in ipairs(redis.call('XPENDING', S, G, '-', '+', 100, c[1])) do
          if not redis.call('ZSCORE', Z, num(p[1])) then
            redis.call('ZADD', Z, now_ms, num(p[1]))
          end
        end
      end
    end
  end
  for _, n in ipairs(redis.call('ZRANGEBYSCORE', Z, '-inf', now_ms - claim_ms, 'LIMIT', 0, 100)) do
    redis.call('XCLAIM', S, G, QUEUE, 0, sid(n), 'JUSTID')
    redis.call('ZREM', Z, n)
  end
  local wait = nil
  for _, p in ipairs(redis.call('XPENDING', S, G, '-', '+', 100, QUEUE)) do
    local n = num(p[1])
    local f = entry(n)
    if not f then
      redis.call('XACK', S, G, p[1])
    else
      local attempts, nx = tries(n)
      if tonumber(f.t) + ttl <= now then
        remove(n, f)
        count('expired', 1)
      elseif nx and tonumber(nx) > now then
        if not wait or tonumber(nx) < tonumber(wait) then wait = nx end
      else
        redis.call('XCLAIM', S, G, me, 0, p[1], 'JUSTID')
        redis.call('ZADD', Z, now_ms, n)
        local k = keyed(f)
        return reply({'due', n, attempts, f.a, k[1], k[2]})
      end
    end
  end
  for _ = 1, 100 do
    local r = redis.call('XREADGROUP', 'GROUP', G, me, 'COUNT', 1, 'STREAMS', S, '>')
    if not r then break end
    local e = r[1][2][1]
    local n, f = num(e[1]), fields(e[2])
    if tonumber(f.t) + ttl <= now then
      remove(n, f)
      count('expired', 1)
    else
      redis.call('ZADD', Z, now_ms, n)
      local k = keyed(f)
      return reply({'due', n, tries(n), f.a, k[1], k[2]})
    end
  end
  if wait then return reply({'wait', wait}) end
  return reply({'empty'})
elseif op == 'settle' then
  -- consumer n how now attempts backoff_ns max_backoff_ns
  local me, n, how = ARGV[2], ARGV[3], ARGV[4]
  if #redis.call('XPENDING', S, G, sid(n), sid(n), 1, me) == 0 then
    return reply({'lost'})
  end
  redis.call('ZREM', Z, n)
  local f = entry(n)
  if not f then
    redis.call('XACK', S, G, sid(n))
    return reply({'lost'})
  end
  if how == 'replayed' then
    remove(n, f)
    count('replayed', 1)
  elseif how == 'notrun' then
    redis.call('XCLAIM', S, G, QUEUE, 0, sid(n), 'JUSTID')
  else
    local now, allowed = tonumber(ARGV[5]), tonumber(ARGV[6])
    local first, most = tonumber(ARGV[7]), tonumber(ARGV[8])
    local attempts = tries(n) + 1
    count('failed', 1)
    if attempts >= allowed then
      remove(n, f)
      local cmd = {'XADD', D, '*', 'i', n, 't', f.t, 'b', f.b, 'a', f.a, 'n', attempts}
      if f.k then
        cmd[#cmd + 1] = 'k'
        cmd[#cmd + 1] = f.k
      end
      redis.call(unpack(cmd))
      count('dead_lettered', 1)
      while redis.call('XLEN', D) > tonumber(ARGV[9]) do
        local old = redis.call('XRANGE', D, '-', '+', 'COUNT', 1)
        redis.call('XDEL', D, old[1][1])
        count('dropped', 1)
      end
    else
      local wait = math.min(first * 2 ^ math.min(attempts - 1, 31), most)
      redis.call('HSET', T, n, attempts .. ' ' .. string.format('%.0f', now + wait))
      redis.call('XCLAIM', S, G, QUEUE, 0, sid(n), 'JUSTID')
    end
  end
  return reply({'ok'})
elseif op == 'status' then
  local first = redis.call('XRANGE', S, '-', '+', 'COUNT', 1)
  local oldest = ''
  if #first > 0 then oldest = fields(first[1][2]).t end
  local out = {redis.call('XLEN', S), tostring(bytes()), oldest, redis.call('XLEN', D)}
  for _, f in ipairs(ORDER) do
    out[#out + 1] = redis.call('HGET', C, f) or '0'
  end
  return out
elseif op == 'entries' then
  -- limit
  local out = {}
  for _, e in ipairs(redis.call('XRANGE', S, '-', '+', 'COUNT', tonumber(ARGV[2]))) do
    local n, f = num(e[1]), fields(e[2])
    local attempts, nx = tries(n)
    local k = keyed(f)
    for _, v in ipairs({n, f.t, attempts, nx or f.t, f.b, k[1], k[2]}) do out[#out + 1] = v end
  end
  return out
elseif op == 'dead' then
  -- limit
  local out = {}
  for _, e in ipairs(redis.call('XRANGE', D, '-', '+', 'COUNT', tonumber(ARGV[2]))) do
    local f = fields(e[2])
    local k = keyed(f)
    for _, v in ipairs({f.i, f.t, f.n, f.t, f.b, k[1], k[2]}) do out[#out + 1] = v end
  end
  return out
elseif op == 'revive' then
  -- now max_entries max_bytes floor
  local max_entries, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
  local revived = 0
  for _, e in ipairs(redis.call('XRANGE', D, '-', '+')) do
    local f = fields(e[2])
    local fits = redis.call('XLEN', S) < max_entries and bytes() + tonumber(f.b) <= max_bytes
      and not (f.k and queued_key(f.k))
    if fits then
      redis.call('XDEL', D, e[1])
      local n = next_n(ARGV[5])
      add(n, ARGV[2], f.b, f.a, f.k ~= nil, f.k)
      revived = revived + 1
    end
  end
  return reply({'revived', revived})
elseif op == 'forget' then
  local n = redis.call('XLEN', D)
  redis.call('DEL', D)
  return reply({'forgot', n})
end
return redis.error_reply('ERR unknown replay journal operation ' .. tostring(op))
