-- A fair waiter gives up its place (see scripts.rs; wake.lua and queue.lua come first): KEYS[1] is the queue,
-- KEYS[2] the places, KEYS[3] the lock or semaphore; ARGV[1] the waiter's id, ARGV[2] '1' on a Redis Cluster. When it
-- was first, the next one is woken (it may find the lock free). Returns 1.
local queue, places, waiter = KEYS[1], KEYS[2], ARGV[1]
local was_first = redis.call('ZRANGE', queue, 0, 0)[1] == waiter
if queue_leave(queue, places, waiter) and was_first then
  publish(released(KEYS[3], ARGV[2]), redis.call('ZRANGE', queue, 0, 0)[1], ARGV[2])
end
return 1
