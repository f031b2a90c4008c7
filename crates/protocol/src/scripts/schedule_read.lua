-- Read a schedule (see scripts.rs): KEYS[1] is its state, KEYS[2] its registrations, KEYS[3] its history, KEYS[4] its
-- records, KEYS[5] its open attempts; ARGV[1] how many records, newest first. Returns {state, replicas, records,
-- open}: the state's fields and values, the instances whose registration has not expired, the newest records' JSON,
-- and the open attempts' records' JSON (running, or waiting for a retry).
local state, replicas, history, records, open = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local function of(ids)
  if #ids == 0 then
    return {}
  end
  return redis.call('HMGET', records, unpack(ids))
end
return {redis.call('HGETALL', state), redis.call('ZRANGEBYSCORE', replicas, now, '+inf'),
  of(redis.call('ZREVRANGE', history, 0, tonumber(ARGV[1]) - 1)), of(redis.call('ZRANGE', open, 0, 99))}
