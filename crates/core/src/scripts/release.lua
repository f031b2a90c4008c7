-- Release one lock (see scripts.rs): its key is KEYS[k], its arguments ARGV[a] (token) and ARGV[a + 1] (the
-- channel its waiters listen on).
local keys_per_lock, args_per_lock = 1, 2
local function one(k, a)
  if redis.call('GET', KEYS[k]) == ARGV[a] then
    redis.call('DEL', KEYS[k])
    redis.call('PUBLISH', ARGV[a + 1], '')
    return 1
  end
  return 0
end
