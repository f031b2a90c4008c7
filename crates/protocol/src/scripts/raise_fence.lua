-- Raise a fence counter (see scripts.rs): KEYS[1] is the counter, ARGV[1] the fence it must reach, ARGV[2] the
-- counter's ttl in ms. A counter below the fence is set to it (and kept its ttl from now); one at or above it stays.
if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
