-- Continue a lock another owner handed over (see scripts.rs): KEYS[1] is the lock, ARGV[1] the token it was handed
-- over with, ARGV[2] the new owner, ARGV[3] the ttl in ms. The lock is ours when it holds that token (with any
-- instance, and '*' when waited for: see acquire.lua): it then holds the new owner, keeping the mark, so that the old
-- owner can neither extend nor release it, and the handle cannot be used again.
local held = redis.call('GET', KEYS[1])
if not held or string.sub(held, 1, #ARGV[1] + 1) ~= ARGV[1] .. ':' then
  return 0
end
local owner = ARGV[2]
if string.sub(held, -1) == '*' then
  owner = owner .. '*'
end
redis.call('SET', KEYS[1], owner, 'PX', ARGV[3])
return 1
