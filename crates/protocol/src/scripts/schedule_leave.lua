-- A replica stops running a schedule (see scripts.rs): KEYS[1] is the schedule's registrations, ARGV[1] the instance.
-- Its registration goes at once, rather than when it would have lapsed. Returns 1 when there was one.
return redis.call('ZREM', KEYS[1], ARGV[1])
