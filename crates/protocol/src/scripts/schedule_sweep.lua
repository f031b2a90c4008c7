-- Find a schedule's open attempts that need another (see scripts.rs): KEYS[1] is its open attempts (id → when to look
-- at it, server ms), KEYS[2] its records; ARGV[1] what its claims' keys start with (a claim's key is that, then the
-- attempt's id), ARGV[2] how many to look at. An attempt due for a look needs another when its record says it is
-- running while its claim is gone (its runner died), or says it failed with a retry due. Attempts with no record, or
-- whose record ended otherwise, leave the open ones. Returns {records, next_in}: the records' JSON, and in how many ms
-- to look again (-1 for never): when the soonest claim of a running one lapses unless renewed, or the next open attempt
-- is due, whichever comes first.
local open, records = KEYS[1], KEYS[2]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local found = {}
local next_in = -1
for _, id in ipairs(redis.call('ZRANGEBYSCORE', open, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))) do
  local record = redis.call('HGET', records, id)
  if record and string.find(record, '"outcome":"running"', 1, true) then
    local lapses_in = redis.call('PTTL', ARGV[1] .. id)
    if lapses_in < 0 then
      found[#found + 1] = record
    elseif next_in < 0 or lapses_in < next_in then
      next_in = lapses_in
    end
  elseif record and string.find(record, '"retryAt":', 1, true) then
    found[#found + 1] = record
  else
    redis.call('ZREM', open, id)
  end
end
local soonest = redis.call('ZRANGEBYSCORE', open, '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
if soonest and (next_in < 0 or tonumber(soonest) - now < next_in) then
  next_in = tonumber(soonest) - now
end
return {found, next_in}
