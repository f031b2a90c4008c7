-- A replica's handlers (see scripts.rs, STORED_RUNNERS): KEYS[1] is the sorted set of live runners (handler, a newline,
-- instance → when that registration lapses, server ms). ARGV[1] how long a registration lasts in ms, '-' to take the
-- members away, or '?' to read them; then the members. Expired registrations go when they are read. Returns the live members for '?',
-- else 1.
local runners = KEYS[1]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
if ARGV[1] == '?' then
  redis.call('ZREMRANGEBYSCORE', runners, '-inf', now)
  return redis.call('ZRANGE', runners, 0, -1)
end
if ARGV[1] == '-' then
  if #ARGV > 1 then
    redis.call('ZREM', runners, unpack(ARGV, 2))
  end
  return 1
end
for n = 2, #ARGV do
  redis.call('ZADD', runners, now + tonumber(ARGV[1]), ARGV[n])
end
redis.call('PEXPIRE', runners, tonumber(ARGV[1]) * 2)
return 1
