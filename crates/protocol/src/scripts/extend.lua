-- Set the lease of a lock we own (see scripts.rs): KEYS[1] is the lock, ARGV[1] our token, ARGV[2] the ttl in ms.
-- The token may be followed by '*' (waited for: see acquire.lua).
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] or held == ARGV[1] .. '*' then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
