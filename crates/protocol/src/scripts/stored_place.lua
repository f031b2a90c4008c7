-- Place a stored schedule in its bucket's due index (see scripts.rs, STORED_PLACE; wake.lua comes first): KEYS[1] is the
-- bucket's handlers (a sorted set of the handler names in use there), KEYS[2] the due index of the schedule's handler,
-- KEYS[3] (optional) another handler's due index it leaves. ARGV[1] the schedule's id, ARGV[2] when it is next due
-- (server ms; '' to take it out), ARGV[3] the score it must still have ('' for any), ARGV[4] the handler, ARGV[5] the
-- bucket's wake channel, ARGV[6] within how many ms from now a due time wakes the runners there, ARGV[7] '1' to only
-- bring it forward (a manual run), ARGV[8] '1' on a Redis Cluster. Returns 1 when placed, 0 when its score was not
-- ARGV[3] (another process placed it meanwhile).
local handlers, due, id = KEYS[1], KEYS[2], ARGV[1]
local current = redis.call('ZSCORE', due, id)
if ARGV[3] ~= '' and (not current or tonumber(current) ~= tonumber(ARGV[3])) then
  return 0
end
if KEYS[3] then
  redis.call('ZREM', KEYS[3], id)
end
if ARGV[2] == '' then
  redis.call('ZREM', due, id)
  return 1
end
local score = tonumber(ARGV[2])
if ARGV[7] == '1' and current and tonumber(current) <= score then
  return 1
end
redis.call('ZADD', due, score, id)
redis.call('ZADD', handlers, 0, ARGV[4])
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
if score <= now + tonumber(ARGV[6]) then
  publish(ARGV[5], ARGV[4], ARGV[8])
end
return 1
