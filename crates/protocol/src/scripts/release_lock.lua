-- Releasing one lock (see scripts.rs; wake.lua comes first), for the scripts that do.
-- Deletes `lock` if it holds `token`, and wakes its waiters when it was waited for (see acquire.lua): 1 when it was
-- ours, else 0. `cluster` is '1' on a Redis Cluster.
local function release_lock(lock, token, cluster)
  local held = redis.call('GET', lock)
  if held == token then
    redis.call('DEL', lock)
    return 1
  end
  if held == token .. '*' then
    redis.call('DEL', lock)
    publish(released(lock, cluster), first_waiter(lock, cluster), cluster)
    return 1
  end
  return 0
end
