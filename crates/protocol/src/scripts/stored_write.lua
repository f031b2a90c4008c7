-- Store a stored schedule's spec (upsertSchedule; see scripts.rs, STORED_WRITE; stored_spec.lua comes first): KEYS[1] is its state. ARGV[1] the
-- version the caller read ('' for none: a new schedule), ARGV[2] the spec (JSON), ARGV[3] the tick of its next
-- occurrence ('' for none), ARGV[4] '1' to count its occurrences from 0 again. The state is the user's data: it has no
-- TTL while the schedule is stored. Returns the new version; -1 when a code schedule uses the name (its state has an
-- expression and no spec), -2 when another write came first (the caller reads again).
local state = KEYS[1]
local fields = redis.call('HMGET', state, 'spec', 'v', 'cron')
if not fields[1] and fields[3] then
  return -1
end
if (fields[2] or '') ~= ARGV[1] then
  return -2
end
local version = tonumber(fields[2] or 0) + 1
spec_write(state, ARGV[2], 'v', version)
if ARGV[3] == '' then
  redis.call('HDEL', state, 'next')
else
  redis.call('HSET', state, 'next', ARGV[3])
end
if ARGV[4] == '1' then
  redis.call('HDEL', state, 'runs')
end
redis.call('HDEL', state, 'done')
redis.call('PERSIST', state)
return version
