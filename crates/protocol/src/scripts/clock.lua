-- The server's clock in microseconds, as one integer (see scripts.rs): a socket of direct calls reads it once, when it
-- opens, to start new fence counters from (protocol/direct/clock.rs).
local now = redis.call('TIME')
return now[1] * 1000000 + now[2]
