-- Shared by the scripts that keep holders in a sorted set (a semaphore's permits, a read-write lock's readers), which
-- come after it (see scripts.rs). `token` holds its place in `set` until `now + ttl` (ms on this server's clock), and
-- the set lasts as long as its last place.
local function hold(set, token, now, ttl)
  redis.call('ZADD', set, now + ttl, token)
  local last = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', set, tonumber(last[2]))
end
