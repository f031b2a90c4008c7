-- Shared by the acquire scripts, which come after it (see scripts.rs). The value `f` of fence counter `fence` as a
-- fence: raised to the server clock's microseconds when it is below CLOCK_FLOOR (2^50, as lock/keys.rs has it), so
-- that a counter that expired and starts again (or one from before counters expired) goes on above every fence it
-- gave before, as long as this server's clock does not step back by more than the time since. The caller has kept
-- the counter `fence_ttl` ms more from now; a raised counter is kept as long.
local function settle(fence, fence_ttl, f)
  if f < 1125899906842624 then
    local now = redis.call('TIME')
    f = math.max(f, now[1] * 1000000 + now[2])
    redis.call('SET', fence, string.format('%.0f', f), 'PX', fence_ttl)
  end
  return f
end
