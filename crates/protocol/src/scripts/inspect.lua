-- What Redis holds for a lock (see scripts.rs): the lock key's lease left in ms (-2 when free) and its fence
-- counter's value (false when it has none).
return {redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2])}
