-- Take the write lock of a read-write lock (see scripts.rs; fence.lua comes first): KEYS[1] is the writer's key (see
-- read_acquire.lua; the lock's waiters are woken on its channel), KEYS[2] the fence counter, KEYS[3] the readers; ARGV[1] the token, ARGV[2] the ttl in ms,
-- ARGV[3] the fence counter's ttl in ms, ARGV[4] '1' when the caller waits. The fence when the write lock is ours,
-- else `-2 - ms` until the writer's key or the first read lock expires. A writer that waits for readers marks the
-- writer's key ('' for WAITING_MS), which keeps new readers out: a stream of readers cannot starve it, and a writer
-- that stopped waiting (timed out, closed, killed) keeps them out no longer than that.
local WAITING_MS = 500
local writer, fence, readers = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, fence_ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local held = redis.call('GET', writer)
if held and held ~= '' and held ~= token and held ~= token .. '*' then
  if ARGV[4] == '1' and string.sub(held, -1) ~= '*' then
    redis.call('APPEND', writer, '*')
  end
  return -2 - redis.call('PTTL', writer)
end
local time = redis.call('TIME')
local now = time[1] * 1000 + math.floor(time[2] / 1000)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local first = redis.call('ZRANGE', readers, 0, 0, 'WITHSCORES')
if first[1] then
  if ARGV[4] == '1' and (not held or held == '') then
    redis.call('SET', writer, '', 'PX', WAITING_MS)
  end
  return -2 - (tonumber(first[2]) - now)
end
-- Ours (or ours again: a call made again with its token keeps it, marked or not).
if held and string.sub(held, -1) == '*' then
  redis.call('SET', writer, token .. '*', 'PX', ttl)
else
  redis.call('SET', writer, token, 'PX', ttl)
end
local counter = redis.call('INCR', fence)
redis.call('PEXPIRE', fence, fence_ttl)
return settle(fence, fence_ttl, counter)
