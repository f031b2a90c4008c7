-- Steer a schedule from any process (see scripts.rs; wake.lua comes first): KEYS[1] is its state, KEYS[2] its
-- registrations, KEYS[3] its pending triggers; ARGV[1] the action, ARGV[2] its control channel, ARGV[3] how long the
-- state is kept at least, in ms, ARGV[4] the action's value, ARGV[5] '1' on a Redis Cluster ('' elsewhere), ARGV[6]
-- (optional) how many live runners a stored schedule's handler has (its replicas do not register it). A stored
-- schedule's state (it holds a spec) has no TTL and is given none. 'suspend' and 'resume'
-- set or clear `suspended`; 'trigger' queues a manual run, at the server's time, when a live replica registered the
-- schedule; 'replace' asks the running attempts of ticks before ARGV[4] to give way; 'handover' changes nothing (an
-- attempt interrupted by its replica's shutdown is due: the replicas that hear it look at once). The replicas hear of
-- it on the channel. Returns {live, tick}: how many live replicas registered the schedule, and the server's time in ms
-- (for a manual run, its tick: 1 ms after the last one's if that is not earlier, so that each is its own).
local state, replicas, triggers, action = KEYS[1], KEYS[2], KEYS[3], ARGV[1]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local live = tonumber(ARGV[6] or redis.call('ZCOUNT', replicas, now, '+inf'))
if action == 'suspend' then
  redis.call('HSET', state, 'suspended', '1')
elseif action == 'resume' then
  redis.call('HDEL', state, 'suspended')
elseif action == 'trigger' then
  if live == 0 then
    return {0, now}
  end
  -- Each manual run's tick is its own, even for two asked for in one millisecond.
  now = math.max(now, tonumber(redis.call('HGET', state, 'manual') or 0) + 1)
  redis.call('HSET', state, 'manual', now)
  redis.call('RPUSH', triggers, now)
  redis.call('PEXPIRE', triggers, ARGV[3])
elseif action == 'replace' then
  if tonumber(redis.call('HGET', state, 'replace') or -1) < tonumber(ARGV[4]) then
    redis.call('HSET', state, 'replace', ARGV[4])
  end
end
if redis.call('EXISTS', state) == 1 and not redis.call('HGET', state, 'spec') and
    redis.call('PTTL', state) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', state, ARGV[3])
end
publish(ARGV[2], action, ARGV[5])
return {live, now}
