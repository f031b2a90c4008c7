-- A semaphore as the fleet's view reports it (see scripts.rs): KEYS[1] the semaphore (see permit_acquire.lua),
-- KEYS[2] its limit key. Returns {holders, limit, pttl}: the permits not expired on this server's clock, the limit
-- its last acquisition gave (false when gone), and the semaphore's ms left (-2 when it is gone).
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
return {redis.call('ZCOUNT', KEYS[1], now + 1, '+inf'), redis.call('GET', KEYS[2]), redis.call('PTTL', KEYS[1])}
