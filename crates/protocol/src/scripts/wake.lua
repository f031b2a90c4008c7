-- Waking waiters (see scripts.rs, keys.rs and core's server/waker.rs), before the scripts that do. `cluster` is '1'
-- on a Redis Cluster.
-- The channel on which a release of `lock` wakes its waiters, named like its fence counter: `lock:released` on a
-- cluster when the lock key has a hash tag of its own, else `{lock}:released`; so on a cluster it hashes to the lock
-- key's slot.
local function released(lock, cluster)
  if cluster == '1' then
    local open = string.find(lock, '{', 1, true)
    local close = open and string.find(lock, '}', open + 1, true)
    if close and close > open + 1 then
      return lock .. ':released'
    end
  end
  return '{' .. lock .. '}:released'
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
