-- Acquire two locks in one attempt each, the second only once the first is taken (see scripts.rs, ACQUIRE_PAIR; `take`
-- and fence.lua come first): a schedule's attempt takes its claim, then its run lock. KEYS[1] and KEYS[2] are the first
-- lock and its fence counter, KEYS[3] and KEYS[4] the second's; ARGV[1] and ARGV[2] their tokens, ARGV[3] the lease in
-- ms, ARGV[4] the fence counters' ttl in ms, ARGV[5] '1' to keep the counters that long from now ('0': the caller kept
-- them lately; a counter shared by both is kept once). Returns {first} when the first is held by someone else, else
-- {first, second}; each as acquire.lua answers an attempt that does not wait: the fence when taken, else -2 - the
-- holder's lease left in ms.
local function attempt(lock, fence, token, keep_counter)
  local held, counter = take(lock, fence, token, ARGV[3], ARGV[4], keep_counter)
  if not held then
    return settle(fence, ARGV[4], counter)
  end
  return -2 - redis.call('PTTL', lock)
end
local keep = ARGV[5] == '1'
local first = attempt(KEYS[1], KEYS[2], ARGV[1], keep)
if first < 0 then
  return {first}
end
return {first, attempt(KEYS[3], KEYS[4], ARGV[2], keep and KEYS[4] ~= KEYS[2])}
