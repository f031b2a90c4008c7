-- Keep the index of every schedule a live replica registered (see scripts.rs): KEYS[1] is the index, a sorted set of
-- names scored by when their last registration expires (server ms); ARGV[1] how long a registration lasts in ms, then
-- the names to keep there (none, to only read it). Drops the names whose registrations expired. Returns the names.
local index, lasts = KEYS[1], tonumber(ARGV[1])
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
for n = 2, #ARGV do
  redis.call('ZADD', index, now + lasts, ARGV[n])
end
redis.call('ZREMRANGEBYSCORE', index, '-inf', now)
if #ARGV > 1 then
  redis.call('PEXPIRE', index, lasts)
end
return redis.call('ZRANGE', index, 0, -1)
