-- Waking waiters (see scripts.rs, keys.rs and core's server/waker.rs), before the scripts that do. `cluster` is '1'
-- on a Redis Cluster.
-- A name beside `lock` that hashes to its slot on a cluster, named like its fence counter: `lock:<suffix>` on a
-- cluster when the lock key has a hash tag of its own, else `{lock}:<suffix>` (keys.rs, `LockKeys::companion`).
local function beside(lock, suffix, cluster)
  if cluster == '1' then
    local open = string.find(lock, '{', 1, true)
    local close = open and string.find(lock, '}', open + 1, true)
    if close and close > open + 1 then
      return lock .. ':' .. suffix
    end
  end
  return '{' .. lock .. '}:' .. suffix
end
-- The channel on which a release of `lock` wakes its waiters.
local function released(lock, cluster)
  return beside(lock, 'released', cluster)
end
-- What a release of `lock` publishes: the id of the first of its fair waiters (queue.lua), whom alone the message
-- wakes, or '' when none queues (the message wakes one waiter of each process).
local function first_waiter(lock, cluster)
  return redis.call('ZRANGE', beside(lock, 'queue', cluster), 0, 0)[1] or ''
end
-- Publishes `message` on `channel`: on a cluster of Redis 7 or newer (or Valkey), on the sharded channel, which
-- reaches only the nodes of its slot's shard, where PUBLISH reaches every node of the cluster. A user whose ACL
-- predates sharded wake-ups (no +spublish) publishes with PUBLISH, as its waiters, refused SSUBSCRIBE, subscribe
-- with SUBSCRIBE (server/waker.rs).
local function publish(channel, message, cluster)
  if cluster == '1' and redis.REDIS_VERSION_NUM then
    local sharded = redis.pcall('SPUBLISH', channel, message)
    if type(sharded) ~= 'table' or not sharded.err then
      return
    end
  end
  redis.call('PUBLISH', channel, message)
end
