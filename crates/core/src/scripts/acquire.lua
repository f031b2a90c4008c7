-- Acquire or refresh one lock (see scripts.rs): KEYS[1] is the lock, KEYS[2] its fence counter; ARGV[1] the token,
-- ARGV[2] the ttl in ms, and ARGV[3], when given, asks for the holder's name.
local lock, fence, token, ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
if redis.call('SET', lock, token, 'NX', 'PX', ttl) then
  return redis.call('INCR', fence)
end
-- Taken (time stands still within a script, so the key cannot lapse from here on).
local holder = redis.call('GET', lock)
if holder == token then
  redis.call('PEXPIRE', lock, ttl)
  return tonumber(redis.call('GET', fence) or '0')
end
local taken = -2 - redis.call('PTTL', lock)
if ARGV[3] then
  return {taken, holder}
end
return taken
