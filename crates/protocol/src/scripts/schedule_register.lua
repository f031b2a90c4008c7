-- Register (or renew the registration of) a replica's schedule, and read what the replica needs to know (see
-- scripts.rs): KEYS[1] is the schedule's state, KEYS[2] its registrations, KEYS[3] its pending triggers, KEYS[4] its
-- history, KEYS[5] its records, KEYS[6] its open attempts; ARGV[1] the instance, ARGV[2] how long the registration
-- lasts in ms, ARGV[3] how long the state and records are kept in ms, ARGV[4] the cron expression, ARGV[5] the time
-- zone, ARGV[6] the newest tick this look back settles (raises `last`; -1 for none), then the ids of the first attempts
-- of the ticks it looks at. Returns {now, since, last, suspended, due, triggers, replace, recorded}: the server's time
-- (ms), when the schedule was first registered, the newest tick a look back settled (-1 for none), 1 when suspended,
-- how many open attempts are due for a look (running past their lease, or waiting for a retry that is due), how many
-- manual runs wait, the tick before which running attempts are to give way (-1 for none), and for each id given 1
-- when it has a record.
local state, replicas, triggers, records, open = KEYS[1], KEYS[2], KEYS[3], KEYS[5], KEYS[6]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local lasts, keep = tonumber(ARGV[2]), ARGV[3]
redis.call('ZREMRANGEBYSCORE', replicas, '-inf', now)
redis.call('ZADD', replicas, now + lasts, ARGV[1])
redis.call('PEXPIRE', replicas, lasts)
redis.call('HSETNX', state, 'since', now)
redis.call('HSET', state, 'cron', ARGV[4], 'timezone', ARGV[5])
for n = 4, 6 do
  redis.call('PEXPIRE', KEYS[n], keep)
end
redis.call('PEXPIRE', state, keep)
local function number(field, default)
  return tonumber(redis.call('HGET', state, field) or default)
end
if tonumber(ARGV[6]) > number('last', -1) then
  redis.call('HSET', state, 'last', ARGV[6])
end
local recorded = {}
if #ARGV > 6 then
  for n, found in ipairs(redis.call('HMGET', records, unpack(ARGV, 7))) do
    recorded[n] = found and 1 or 0
  end
end
local suspended = 0
if redis.call('HGET', state, 'suspended') then
  suspended = 1
end
return {now, number('since', now), number('last', -1), suspended, redis.call('ZCOUNT', open, '-inf', now),
  redis.call('LLEN', triggers), number('replace', -1), recorded}
