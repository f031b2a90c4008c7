-- Store a shared result while its lock is ours (see scripts.rs): KEYS[1] is the lock, KEYS[2] the result; ARGV[1] our
-- owner, ARGV[2] the entry, ARGV[3] its ttl in ms. The owner may be followed by '*' (waited for: see acquire.lua).
local held = redis.call('GET', KEYS[1])
if held ~= ARGV[1] and held ~= ARGV[1] .. '*' then
  return 0
end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ARGV[3])
return 1
