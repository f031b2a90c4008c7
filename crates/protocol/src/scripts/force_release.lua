-- Delete a lock whoever holds it (see scripts.rs; wake.lua comes first), waking its waiters on the lock's channel:
-- 1 when there was a lock, else 0. ARGV[1] is '1' on a Redis Cluster.
if redis.call('DEL', KEYS[1]) == 1 then
  publish(released(KEYS[1], ARGV[1]), first_waiter(KEYS[1], ARGV[1]), ARGV[1])
  return 1
end
return 0
