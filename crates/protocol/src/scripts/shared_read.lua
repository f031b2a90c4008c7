-- What a shared result's key holds (see scripts.rs): KEYS[1] is the result; nil when none is stored.
return redis.call('GET', KEYS[1])
