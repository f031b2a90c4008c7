-- One step of a scan of a server's keys (see scripts.rs): KEYS[1] only routes the call (on a cluster, to the master
-- of its slot); ARGV[1] the cursor, ARGV[2] the MATCH glob, ARGV[3] the COUNT hint, ARGV[4] the type of the keys
-- wanted; with ARGV[5] = '1', only string keys whose value is a lock's owner (32 hex digits, ':', the instance; see
-- owner.rs), with '2' only sorted sets whose first member is one (a semaphore's holders). Returns {cursor, keys}.
local step = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3], 'TYPE', ARGV[4])
if ARGV[5] ~= '1' and ARGV[5] ~= '2' then
  return step
end
local owner = '^' .. string.rep('%x', 32) .. ':'
local found = {}
for _, key in ipairs(step[2]) do
  local value
  if ARGV[5] == '1' then
    value = redis.call('GET', key)
  else
    value = redis.call('ZRANGE', key, 0, 0)[1]
  end
  if value and string.find(value, owner) then
    found[#found + 1] = key
  end
end
return {step[1], found}
