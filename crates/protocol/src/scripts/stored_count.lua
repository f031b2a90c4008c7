-- How many stored schedules one handler has in a bucket, and how many of them are overdue (see scripts.rs,
-- STORED_COUNT): KEYS[1] is the handler's due index there; ARGV[1] how long past its due time a schedule counts as
-- overdue, in ms. Returns {count, overdue}.
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCOUNT', KEYS[1], '-inf', now - tonumber(ARGV[1]))}
