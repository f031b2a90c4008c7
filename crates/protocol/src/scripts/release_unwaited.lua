-- The release of one lock that no one waits for, the common case, first (see scripts.rs): it answers before
-- wake.lua and release.lua define their functions, which would cost Redis about a fifth of such a call
-- (bench/results/2026-11-26-cluster-release.md). A waited-for lock, and several locks, go on to release.lua.
if #KEYS == 1 then
  local held = redis.call('GET', KEYS[1])
  if held == ARGV[1] then
    redis.call('DEL', KEYS[1])
    return 1
  end
  if held ~= ARGV[1] .. '*' then
    return 0
  end
end
