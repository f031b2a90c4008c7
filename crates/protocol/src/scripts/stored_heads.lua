-- When the next stored schedule of each handler is due in one bucket (see scripts.rs, STORED_HEADS): KEYS are the
-- handlers' due indexes there. Returns {now, heads}: the server's time in ms, and for each index its first score (-1
-- when empty).
local time = redis.call('TIME')
local heads = {}
for n, due in ipairs(KEYS) do
  local head = redis.call('ZRANGE', due, 0, 0, 'WITHSCORES')[2]
  heads[n] = head and tonumber(head) or -1
end
return {time[1] * 1000 + math.floor(time[2] / 1000), heads}
