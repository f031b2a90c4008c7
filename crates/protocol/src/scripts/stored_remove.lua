-- Remove a stored schedule (removeSchedule; see scripts.rs, STORED_REMOVE; stored_spec.lua comes first): KEYS[1] is its state, KEYS[2] to KEYS[6]
-- its history, records, open attempts, registrations and triggers, all deleted. Returns its spec (JSON: the caller
-- takes it out of its due index), or false when no stored schedule has the name (a code schedule's keys stay).
local spec = spec_read(KEYS[1])
if not spec then
  return false
end
redis.call('DEL', unpack(KEYS))
return spec
