-- Release locks (see scripts.rs; release_unwaited.lua, wake.lua and release_lock.lua come first): lock n's key is
-- KEYS[n] and its token ARGV[n], and ARGV[#KEYS + 1] is '1' on a Redis Cluster. A call for one lock answers 1 or 0; a
-- call for several an array of them, in order, where a lock whose work failed (say, its key holds another type) has
-- its error and the others are done all the same.
local function one(n)
  return release_lock(KEYS[n], ARGV[n], ARGV[#KEYS + 1])
end
if #KEYS == 1 then
  return one(1)
end
local replies = {}
for n = 1, #KEYS do
  local ok, reply = pcall(one, n)
  if not ok and type(reply) ~= 'table' then
    reply = {err = tostring(reply)}
  end
  replies[n] = reply
end
return replies
