-- Acquire or refresh one lock (see scripts.rs): its keys are KEYS[k] (lock) and KEYS[k + 1] (fence counter), its
-- arguments ARGV[a] (token) and ARGV[a + 1] (ttl in ms); ARGV[3], in a call for one lock, asks for the holder's name.
local keys_per_lock, args_per_lock = 2, 2
local function one(k, a)
  local lock, fence, token, ttl = KEYS[k], KEYS[k + 1], ARGV[a], ARGV[a + 1]
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
  if #KEYS == 2 and ARGV[3] then
    return {taken, holder}
  end
  return taken
end
