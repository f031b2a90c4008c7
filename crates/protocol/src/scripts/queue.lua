-- Fair waiting (see scripts.rs), before the acquire scripts: the fair waiters of a lock or a semaphore queue in
-- `queue`, a sorted set of their ids scored by when each started waiting (µs on this server's clock), and each keeps
-- its place by coming back: `places` holds the same ids scored by when each place lapses (ms). A waiter that stopped
-- coming back (crashed, paused) loses its place once it lapses; one that gave up leaves at once (queue_leave.lua).
-- Both keys last as long as the last place.

-- Drops the lapsed places, puts `waiter` at the end of the queue unless it is in it, and keeps its place for
-- `place_ms` from `time` (TIME's reply). True when `waiter` is first; else the ms until the first one's place lapses.
local function queue_turn(queue, places, waiter, place_ms, time)
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  for _, lapsed in ipairs(redis.call('ZRANGEBYSCORE', places, '-inf', now)) do
    redis.call('ZREM', queue, lapsed)
    redis.call('ZREM', places, lapsed)
  end
  if not redis.call('ZSCORE', queue, waiter) then
    -- After the last one, also within the same µs.
    local came = time[1] * 1000000 + time[2]
    local last = redis.call('ZRANGE', queue, -1, -1, 'WITHSCORES')[2]
    if last and tonumber(last) >= came then
      came = tonumber(last) + 1
    end
    redis.call('ZADD', queue, came, waiter)
  end
  redis.call('ZADD', places, now + place_ms, waiter)
  redis.call('PEXPIRE', queue, place_ms)
  redis.call('PEXPIRE', places, place_ms)
  local first = redis.call('ZRANGE', queue, 0, 0)[1]
  if first == waiter then
    return true
  end
  return tonumber(redis.call('ZSCORE', places, first)) - now
end

-- `waiter` leaves the queue (it got what it waited for, or gave up). Whether others still queue.
local function queue_leave(queue, places, waiter)
  redis.call('ZREM', queue, waiter)
  redis.call('ZREM', places, waiter)
  return redis.call('EXISTS', queue) == 1
end
