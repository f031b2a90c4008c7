-- Place stored schedules of one handler in their bucket's due index (see scripts.rs, STORED_PLACE; wake.lua comes
-- first): KEYS[1] is the bucket's handlers (a sorted set of the handler names in use there), KEYS[2] the handler's due
-- index, KEYS[3] (optional) another handler's due index they leave. ARGV[1] the handler, ARGV[2] the bucket's wake
-- channel, ARGV[3] within how many ms from now a due time wakes the runners there, ARGV[4] '1' to only bring them
-- forward (a manual run), ARGV[5] '1' on a Redis Cluster; then for each schedule three: its id, when it is next due
-- (server ms; '' to take it out) and the score it must still have ('' for any). Returns for each 1 when placed, 0 when
-- its score was not the one given (another process placed it meanwhile).
local handlers, due = KEYS[1], KEYS[2]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local soon, placed, added, wake = now + tonumber(ARGV[3]), {}, false, false
for n = 6, #ARGV, 3 do
  local id, score, expect = ARGV[n], ARGV[n + 1], ARGV[n + 2]
  local current = redis.call('ZSCORE', due, id)
  if expect ~= '' and (not current or tonumber(current) ~= tonumber(expect)) then
    placed[#placed + 1] = 0
  else
    if KEYS[3] then
      redis.call('ZREM', KEYS[3], id)
    end
    if score == '' then
      redis.call('ZREM', due, id)
    else
      score = tonumber(score)
      if not (ARGV[4] == '1' and current and tonumber(current) <= score) then
        redis.call('ZADD', due, score, id)
        added, wake = true, wake or score <= soon
      end
    end
    placed[#placed + 1] = 1
  end
end
if added then
  redis.call('ZADD', handlers, 0, ARGV[1])
end
if wake then
  publish(ARGV[2], ARGV[1], ARGV[5])
end
return placed
