-- Take a permit of a semaphore (see scripts.rs; fence.lua and holders.lua come first): KEYS[1] is the semaphore, a sorted set of
-- its holders' tokens scored by when each permit expires (ms on this server's clock: client clocks never judge
-- expiry), KEYS[2] its fence counter, KEYS[3] where its limit is kept for the fleet's view (as long as the counter);
-- ARGV[1] the token, ARGV[2] the ttl in ms, ARGV[3] the fence counter's ttl in ms, ARGV[4] the limit. The fence (a new one, also for a token asking again) when the permit is ours, else
-- `-2 - ms` until the first permit expires.
local sem, fence, token, ttl, fence_ttl, limit = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)

redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
if not redis.call('ZSCORE', sem, token) and redis.call('ZCARD', sem) >= limit then
  local first = redis.call('ZRANGE', sem, 0, 0, 'WITHSCORES')
  return -2 - (tonumber(first[2]) - now)
end
hold(sem, token, now, ttl)
local counter = redis.call('INCR', fence)
redis.call('PEXPIRE', fence, fence_ttl)
redis.call('SET', KEYS[3], limit, 'PX', fence_ttl)
return settle(fence, fence_ttl, counter)
