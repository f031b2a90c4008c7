-- Take the oldest manual run asked for (see scripts.rs): KEYS[1] is the schedule's pending triggers. Returns its tick,
-- or false when none waits: each is taken by one replica only.
return redis.call('LPOP', KEYS[1])
