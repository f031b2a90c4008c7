-- Acquire or refresh one lock (see scripts.rs; `take`, from protocol/acquisition.rs, and fence.lua come first):
-- KEYS[1] is the lock, KEYS[2] its fence counter; ARGV[1] the token, ARGV[2] the ttl in ms, ARGV[3] the fence
-- counter's ttl in ms; ARGV[4] = '1' asks for the holder's name, ARGV[5] = '1' marks a held lock as waited for, '2'
-- also the lock once ours (others wait behind this caller). A fair waiter (queue.lua comes first) also gives KEYS[3]
-- the queue, KEYS[4] the places, ARGV[6] its id and ARGV[7] how long its place lasts in ms: it takes the lock only
-- when first in the queue, and leaves the queue when it does.
local lock, fence, token, ttl, fence_ttl = KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[3]
local queue, places, waiter = KEYS[3], KEYS[4], ARGV[6]
if queue then
  local turn = queue_turn(queue, places, waiter, tonumber(ARGV[7]), redis.call('TIME'))
  if turn ~= true then
    -- Another's turn: retry when its place would lapse (its release wakes the first waiter sooner).
    local held = redis.call('GET', lock)
    if held and string.sub(held, -1) ~= '*' then
      redis.call('APPEND', lock, '*')
    end
    return -2 - turn
  end
end
-- What the lock held (false when it was free: `take` made it ours) and the counted-up fence counter.
local held, counter = take(lock, fence, token, ttl, fence_ttl)
if not held then
  -- A fair waiter that took it leaves the queue; the next waiter is woken by this lock's release.
  if ARGV[5] == '2' or (queue and queue_leave(queue, places, waiter)) then
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
