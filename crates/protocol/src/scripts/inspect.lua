-- What Redis holds for a lock (see scripts.rs): the lock key's lease left in ms (-2 when free), its fence counter's
-- value (false when it has none), and the lock's owner (false when free, or for a semaphore, whose key is a set).
local held = false
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  held = redis.call('GET', KEYS[1])
end
return {redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]), held}
