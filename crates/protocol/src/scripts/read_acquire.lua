-- Take a read lock of a read-write lock (see scripts.rs; fence.lua and holders.lua come first): KEYS[1] is the readers, a sorted set
-- of their tokens scored by when each read lock expires (ms on this server's clock, as a semaphore's permits, which
-- permit_extend.lua and permit_release.lua keep), KEYS[2] the fence counter, KEYS[3] the writer's key (a writer's
-- token, followed by '*' once someone waits for it; or '' while a writer waits for the readers to leave); ARGV[1] the
-- token, ARGV[2] the ttl in ms, ARGV[3] the fence counter's ttl in ms, ARGV[4] '1' when the caller waits. The fence
-- when the read lock is ours, else `-2 - ms` until the writer's key expires.
local readers, fence, writer = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, fence_ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
-- A writer holds the lock or waits for it: no new reader gets in (a reader asking again keeps its read lock).
local held = redis.call('GET', writer)
if held and not redis.call('ZSCORE', readers, token) then
  -- A caller that waits for a writer has its release wake the waiters (release.lua).
  if ARGV[4] == '1' and held ~= '' and string.sub(held, -1) ~= '*' then
    redis.call('APPEND', writer, '*')
  end
  return -2 - redis.call('PTTL', writer)
end
hold(readers, token, now, ttl)
local counter = redis.call('INCR', fence)
redis.call('PEXPIRE', fence, fence_ttl)
return settle(fence, fence_ttl, counter)
