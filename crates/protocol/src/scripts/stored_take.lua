-- Take the stored schedules of one handler that are due in one bucket (see scripts.rs, STORED_TAKE): KEYS[1] is the
-- handler's due index there. ARGV[1] how many at most, ARGV[2] how long the taker holds them in ms (each is due again
-- then, should the taker die before placing it). Returns {taken, held, head}: the ids taken, the score they now
-- have, and when the next one left is due (-1 for none).
local due = KEYS[1]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local held = now + tonumber(ARGV[2])
local taken = redis.call('ZRANGEBYSCORE', due, '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, id in ipairs(taken) do
  redis.call('ZADD', due, held, id)
end
local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')[2]
return {taken, held, head and tonumber(head) or -1}
