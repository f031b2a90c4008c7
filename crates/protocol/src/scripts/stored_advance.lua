-- A stored schedule's occurrence was dispatched (see scripts.rs, STORED_ADVANCE): KEYS[1] is its state, KEYS[2] to
-- KEYS[6] its history, records, open attempts, registrations and triggers. ARGV[1] the version read, ARGV[2] the
-- dispatched tick (which must still be `next`), ARGV[3] the tick after it ('' for none: the schedule is finished),
-- ARGV[4] how long a finished schedule is kept in ms, ARGV[5] '1' when the occurrence counts (it ran or was missed: not
-- an older one superseded). A finished schedule's keys all expire after ARGV[4]. Returns 1 when done, 0 when the state
-- changed meanwhile (an upsert, a removal: nothing is written).
local state = KEYS[1]
local fields = redis.call('HMGET', state, 'v', 'next')
if fields[1] ~= ARGV[1] or fields[2] ~= ARGV[2] then
  return 0
end
redis.call('HSET', state, 'last', ARGV[2])
if ARGV[5] == '1' then
  redis.call('HINCRBY', state, 'runs', 1)
end
if ARGV[3] == '' then
  local time = redis.call('TIME')
  redis.call('HDEL', state, 'next')
  redis.call('HSET', state, 'done', time[1] * 1000 + math.floor(time[2] / 1000))
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIRE', key, ARGV[4])
  end
else
  redis.call('HSET', state, 'next', ARGV[3])
end
return 1
