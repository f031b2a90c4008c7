-- Take a permit of a semaphore (see scripts.rs; fence.lua and holders.lua come first): KEYS[1] is the semaphore, a sorted set of
-- its holders' tokens scored by when each permit expires (ms on this server's clock: client clocks never judge
-- expiry), KEYS[2] its fence counter, KEYS[3] where its limit is kept for the fleet's view (as long as the counter);
-- ARGV[1] the token, ARGV[2] the ttl in ms, ARGV[3] the fence counter's ttl in ms, ARGV[4] the limit. The fence (a new one, also for a token asking again) when the permit is ours, else
-- `-2 - ms` until the first permit expires. A fair waiter (see acquire.lua) also gives KEYS[4] the queue, KEYS[5] the
-- places, ARGV[5] its id, ARGV[6] how long its place lasts in ms and ARGV[7] '1' on a Redis Cluster: it takes a permit
-- only when first in the queue, and then wakes the next one if a permit is left.
local sem, fence, token, ttl, fence_ttl, limit = KEYS[1], KEYS[2], ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)

redis.call('ZREMRANGEBYSCORE', sem, '-inf', now)
local queue, places, waiter = KEYS[4], KEYS[5], ARGV[5]
if queue then
  local turn = queue_turn(queue, places, waiter, tonumber(ARGV[6]), time)
  if turn ~= true then
    return -2 - turn
  end
end
if not redis.call('ZSCORE', sem, token) and redis.call('ZCARD', sem) >= limit then
  local first = redis.call('ZRANGE', sem, 0, 0, 'WITHSCORES')
  return -2 - (tonumber(first[2]) - now)
end
hold(sem, token, now, ttl)
local counter = redis.call('INCR', fence)
redis.call('PEXPIRE', fence, fence_ttl)
redis.call('SET', KEYS[3], limit, 'PX', fence_ttl)
if queue and queue_leave(queue, places, waiter) and redis.call('ZCARD', sem) < limit then
  publish(released(sem, ARGV[7]), first_waiter(sem, ARGV[7]), ARGV[7])
end
return settle(fence, fence_ttl, counter)
