-- Set the expiry of a permit we hold (see scripts.rs; holders.lua comes first): KEYS[1] is the semaphore (see
-- permit_acquire.lua; or a read-write lock's readers), ARGV[1] our token, ARGV[2] the ttl in ms. 1 when the permit
-- was ours and had not expired on this server's clock, else 0.
local sem, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
local expires = redis.call('ZSCORE', sem, token)
if not expires or tonumber(expires) <= now then
  return 0
end
hold(sem, token, now, ttl)
return 1
