-- Release locks (see scripts.rs; release_unwaited.lua, wake.lua and release_lock.lua come first): lock n's key is
-- KEYS[n] and its token ARGV[n], and ARGV[#KEYS + 1] is '1' on a Redis Cluster. A call for one lock answers 1 or 0; a
-- call for several an array of them, in order, where a lock whose work failed (say, its key holds another type) has
-- its error and the others are done all the same.
local cluster = ARGV[#KEYS + 1]
local function one(n)
  return release_lock(KEYS[n], ARGV[n], cluster)
end
if #KEYS == 1 then
  return one(1)
end
-- Several locks: read with one MGET and those still ours deleted with one DEL, each `redis.call` costing Redis more
-- than the comparisons (bench/results/2026-11-28-release-mget.md); a thousand keys at a time, as Lua's `unpack` takes
-- a few thousand at most. A key MGET finds no string at (gone, or of another type) goes the one-lock way, which tells
-- the two apart.
local replies = {}
for first = 1, #KEYS, 1000 do
  local last = math.min(first + 999, #KEYS)
  local held = redis.call('MGET', unpack(KEYS, first, last))
  local ours, waited = {}, {}
  for n = first, last do
    local value, token = held[n - first + 1], ARGV[n]
    if value == token then
      ours[#ours + 1] = KEYS[n]
      replies[n] = 1
    elseif not value then
      local ok, reply = pcall(one, n)
      if not ok and type(reply) ~= 'table' then
        reply = {err = tostring(reply)}
      end
      replies[n] = reply
    elseif value == token .. '*' then
      ours[#ours + 1] = KEYS[n]
      waited[#waited + 1] = KEYS[n]
      replies[n] = 1
    else
      replies[n] = 0
    end
  end
  if #ours > 0 then
    redis.call('DEL', unpack(ours))
  end
  for _, lock in ipairs(waited) do
    publish(released(lock, cluster), first_waiter(lock, cluster), cluster)
  end
end
return replies
