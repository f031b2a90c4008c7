-- Write the first record of a stored schedule's dispatched occurrence and its next tick, in one call (see scripts.rs,
-- STORED_FIRST_RECORD; schedule_record.lua and stored_advance.lua come first): KEYS[1] to KEYS[4], the locks it must
-- still hold and the record's ARGVs as for schedule_record.lua, then KEYS[#KEYS] the schedule's triggers, and the last
-- five ARGVs stored_advance.lua's. The next tick is written whatever the record came to (suspended, or written by
-- another replica: the occurrence is dispatched either way); when the schedule then finishes, the record leaves the
-- keys' TTLs to it. The state is read once for both. Answers as schedule_record.lua.
local locks = #KEYS - 5
local argc = #ARGV - 5
local version, due, following = ARGV[argc + 1], ARGV[argc + 2], ARGV[argc + 3]
local state = redis.call('HMGET', KEYS[1], 'v', 'next', 'spec', 'suspended', 'done', 'runs')
local advances = state[1] == version and state[2] == due
local written, now = write_record(locks, argc, advances and following == '', {state[3], state[4], state[5]})
if advances then
  local keys = {KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[#KEYS]}
  advance(keys, version, due, following, ARGV[argc + 4], ARGV[argc + 5], {runs = state[6], now = now})
end
return written
