-- Give back a permit we hold (see scripts.rs; wake.lua comes first): KEYS[1] is the semaphore (see
-- permit_acquire.lua; or a read-write lock's readers, and KEYS[2] its writer's key: see read_acquire.lua), ARGV[1]
-- our token, ARGV[2] '1' on a Redis Cluster. Wakes the waiters, on the semaphore's channel (the writer key's for a
-- read lock). 1 when the permit was ours and had not expired on this server's clock, else 0.
local sem, token = KEYS[1], ARGV[1]
local expires = redis.call('ZSCORE', sem, token)
if not expires then
  return 0
end
redis.call('ZREM', sem, token)
-- A read-write lock's waiters do not queue.
publish(released(KEYS[2] or sem, ARGV[2]), KEYS[2] and '' or first_waiter(sem, ARGV[2]), ARGV[2])
local time = redis.call('TIME')
if tonumber(expires) <= time[1] * 1000 + math.floor(time[2] / 1000) then
  return 0
end
return 1
