-- Write the record of an attempt's end, then give its locks back, in one call (see scripts.rs, SCHEDULE_END; wake.lua,
-- release_lock.lua and schedule_record.lua come first): KEYS[1] to KEYS[4] and the first ARGVs as for
-- schedule_record.lua (no lock it must still hold), then KEYS[5] on the locks to release, their owners the ARGVs after
-- the record's, in order, and the last ARGV '1' on a Redis Cluster. The locks go whether the record was written or not.
-- Answers as schedule_record.lua.
local releases = #KEYS - 4
local argc = #ARGV - releases - 1
local written = write_record(0, argc)
for n = 1, releases do
  release_lock(KEYS[4 + n], ARGV[argc + n], ARGV[#ARGV])
end
return written
