-- Acquire or refresh one lock (see scripts.rs; `take`, from protocol/acquisition.rs, and fence.lua come first):
-- KEYS[1] is the lock, KEYS[2] its fence counter; ARGV[1] the token, ARGV[2] the ttl in ms, ARGV[3] the fence
-- counter's ttl in ms; ARGV[4] = '1' asks for the holder's name, ARGV[5] = '1' marks a held lock as waited for, '2'
-- also the lock once ours (others wait behind this caller).
local lock, fence, token, ttl, fence_ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
-- What the lock held (false when it was free: `take` made it ours) and the counted-up fence counter.
local held, counter = take(lock, fence, token, ttl, fence_ttl)
if not held then
  if ARGV[5] == '2' then
    redis.call('APPEND', lock, '*')
  end
  return settle(fence, fence_ttl, counter)
end
-- Taken (time stands still within a script, so the key cannot lapse from here on). The holder's token is followed
-- by '*' once someone waits for the lock, which has its release wake the waiters.
local waited = string.sub(held, -1) == '*'
local holder = waited and string.sub(held, 1, -2) or held
if holder == token then
  redis.call('PEXPIRE', lock, ttl)
  return settle(fence, fence_ttl, counter)
end
if (ARGV[5] == '1' or ARGV[5] == '2') and not waited then
  redis.call('APPEND', lock, '*')
end
local taken = -2 - redis.call('PTTL', lock)
if ARGV[4] == '1' then
  return {taken, holder}
end
return taken
