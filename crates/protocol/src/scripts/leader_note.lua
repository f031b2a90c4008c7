-- A leader's term begins or ends (lead.rs): when it begins, the term (its token and fence) is kept beside the lock for
-- ttl ms, so that an observer can tell whose term the lock's holder is in; either way the change is published on the
-- leader channel, which wakes the observers (wake.lua's `publish`).
-- KEYS: the term key. ARGV: the leader channel, the term ('' when it ends), the term's ttl in ms, then '1' on a Redis
-- Cluster.
if ARGV[2] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
publish(ARGV[1], ARGV[2], ARGV[4])
return 1
