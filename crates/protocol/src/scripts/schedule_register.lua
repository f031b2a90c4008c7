-- Register (or renew the registration of) a replica's schedule, and read what the replica needs to know (see
-- scripts.rs): KEYS[1] is the schedule's state, KEYS[2] its registrations, KEYS[3] its pending triggers, KEYS[4] its
-- history, KEYS[5] its records, KEYS[6] its open attempts; ARGV[1] the instance, ARGV[2] how long the registration
-- lasts in ms, ARGV[3] how long the state and records are kept in ms, ARGV[4] the cron expression, ARGV[5] the time
-- zone, ARGV[6] the newest tick this look back settles (raises `last`; -1 for none), ARGV[7] '1' to refresh the
-- schedule (its expression and the keys' TTLs; done anyway when its state is gone), ARGV[8] to ARGV[15] four fields
-- of the state and their values (its limits: timeout, maxRuntime, startingDeadline, jitter; written with the
-- expression), then
-- the ids of the first attempts of the ticks the look back looks at. Returns {now, since, last, suspended, due, triggers, replace,
-- due_in, recorded}: the server's time (ms), when the schedule was first registered, the newest tick a look back
-- settled (-1 for none), 1 when suspended, how many open attempts are due for a look (running past their lease, or
-- waiting for a retry that is due), how many manual runs wait, the tick before which running attempts are to give way
-- (-1 for none), in how many ms the next open attempt is due for a look (-1 for none), and for each id given 1 when it
-- has a record. Errors (STORED_NAME) when a stored schedule has the name (its state holds a spec).
local state, replicas, triggers, records, open = KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local keep = ARGV[3]
if redis.call('HGET', state, 'spec') then
  return redis.error_reply('STORED_NAME a stored schedule has this name')
end
local fields = redis.call('HMGET', state, 'since', 'last', 'suspended', 'replace')
if ARGV[7] == '1' or not fields[1] then
  redis.call('HSETNX', state, 'since', now)
  redis.call('HSET', state, 'cron', ARGV[4], 'timezone', ARGV[5], ARGV[8], ARGV[9], ARGV[10], ARGV[11], ARGV[12],
    ARGV[13], ARGV[14], ARGV[15])
  redis.call('ZREMRANGEBYSCORE', replicas, '-inf', now)
  for n = 1, 6 do
    redis.call('PEXPIRE', KEYS[n], keep)
  end
  fields[1] = fields[1] or now
end
-- A registration that is new here (a first one, or a key that was gone) gives the key its TTL at once.
if redis.call('ZADD', replicas, now + tonumber(ARGV[2]), ARGV[1]) == 1 then
  redis.call('PEXPIRE', replicas, keep)
end
local last = tonumber(fields[2] or -1)
if tonumber(ARGV[6]) > last then
  last = tonumber(ARGV[6])
  redis.call('HSET', state, 'last', last)
end
local recorded = {}
if #ARGV > 15 then
  for n, found in ipairs(redis.call('HMGET', records, unpack(ARGV, 16))) do
    recorded[n] = found and 1 or 0
  end
end
local suspended = 0
if fields[3] then
  suspended = 1
end
local soonest = redis.call('ZRANGEBYSCORE', open, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
local due_in = soonest and tonumber(soonest) - now or -1
return {now, tonumber(fields[1]), last, suspended, redis.call('ZCOUNT', open, '-inf', now), redis.call('LLEN', triggers),
  tonumber(fields[4] or -1), due_in, recorded}
