-- The end of the scripts that act on several locks in one call (appended to acquire.lua and release.lua, which
-- define `one`, the work for one lock, and how many keys and arguments each lock takes). A call for one lock
-- answers `one`'s reply; a call for several answers an array of them, in order, where a lock whose work failed
-- (say, its key holds another type) has its error and the others are done all the same.
if #KEYS == keys_per_lock then
  return one(1, 1)
end
local replies = {}
for n = 0, #KEYS / keys_per_lock - 1 do
  local ok, reply = pcall(one, 1 + n * keys_per_lock, 1 + n * args_per_lock)
  if not ok and type(reply) ~= 'table' then
    reply = {err = tostring(reply)}
  end
  replies[n + 1] = reply
end
return replies
