-- Read a stored schedule's state (see scripts.rs, STORED_STATE; stored_spec.lua comes first): KEYS[1] is its state,
-- KEYS[2] and KEYS[3] (optional, for a runner's visit) its open attempts and pending manual runs. Returns {spec, v,
-- next, runs, since, last, done, suspended, cron, now, open, triggers}: the spec (JSON), its version, the tick of the
-- next occurrence to dispatch, how many occurrences were dispatched, when it was first stored, the newest dispatched
-- tick, when it finished, '1' when suspended, a code schedule's expression (when a code schedule uses the name), each
-- false when not there, the server's time in ms, and (with KEYS[2] and KEYS[3]) how many open attempts and pending
-- manual runs it has (a visit looks at them only when there are some).
local time = redis.call('TIME')
local fields =
  redis.call('HMGET', KEYS[1], 'spec', 'v', 'next', 'runs', 'since', 'last', 'done', 'suspended', 'cron', 'spec2')
-- A spec of one field (most) is read whole here.
if fields[10] then
  fields[1] = spec_read(KEYS[1])
end
fields[10] = time[1] * 1000 + math.floor(time[2] / 1000)
if KEYS[3] then
  -- Most schedules have neither: one call tells.
  local some = redis.call('EXISTS', KEYS[2], KEYS[3]) > 0
  fields[11] = some and redis.call('ZCARD', KEYS[2]) or 0
  fields[12] = some and redis.call('LLEN', KEYS[3]) or 0
end
return fields
