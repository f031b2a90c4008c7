-- A stored schedule's spec in its state, cut into fields of at most 64 bytes: 'spec' (which alone tells that the state
-- holds a stored schedule), then 'spec2', 'spec3', ... for the rest. No field is then longer than a default server's
-- hash-max-listpack-value (64), and the state stays a listpack (about half the memory of a hashtable).

-- The spec (JSON) in `state`, or false when it holds none.
local function spec_read(state)
  local parts, n = {}, 1
  local part = redis.call('HGET', state, 'spec')
  while part do
    parts[n] = part
    n = n + 1
    part = redis.call('HGET', state, 'spec' .. n)
  end
  return n > 1 and table.concat(parts)
end

-- Writes `json` as the spec in `state`, with `...` (more field, value pairs) in the same HSET.
local function spec_write(state, json, ...)
  local n = 2
  while redis.call('HDEL', state, 'spec' .. n) == 1 do
    n = n + 1
  end
  local fields = {...}
  for at = 1, #json, 64 do
    local n = (at - 1) / 64 + 1
    fields[#fields + 1] = n == 1 and 'spec' or 'spec' .. n
    fields[#fields + 1] = string.sub(json, at, at + 63)
  end
  redis.call('HSET', state, unpack(fields))
end
