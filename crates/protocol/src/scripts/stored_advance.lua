-- A stored schedule's occurrence was dispatched (see scripts.rs, STORED_ADVANCE and STORED_FIRST_RECORD): `keys` are
-- its state, history, records, open attempts and triggers; `version` the version read, `due` the dispatched tick (which
-- must still be `next`), `following` the tick after it ('' for none: the schedule is finished), `retention` how long a
-- finished schedule is kept in ms, `counts` '1' when the occurrence counts (it ran or was missed: not an older one
-- superseded). A finished schedule's keys all expire after `retention` (a code schedule's registrations, should one
-- have used the name, expire by their own TTL).

-- Whether the state still holds the version read, with `due` next: `advance` writes only then.
local function advanceable(state, version, due)
  local fields = redis.call('HMGET', state, 'v', 'next')
  return fields[1] == version and fields[2] == due
end

-- Returns 1 when done, 0 when the state changed meanwhile (an upsert, a removal: nothing is written). `read`, when
-- given: the caller found it advanceable in this script, the state's `runs` (false for none) and the server's time in
-- ms (false: not read yet).
local function advance(keys, version, due, following, retention, counts, read)
  local state = keys[1]
  if not (read or advanceable(state, version, due)) then
    return 0
  end
  local fields = {'last', due}
  if counts == '1' then
    if read then
      fields[3], fields[4] = 'runs', tonumber(read.runs or 0) + 1
    else
      redis.call('HINCRBY', state, 'runs', 1)
    end
  end
  if following == '' then
    local now = read and read.now
    if not now then
      local time = redis.call('TIME')
      now = time[1] * 1000 + math.floor(time[2] / 1000)
    end
    fields[#fields + 1], fields[#fields + 2] = 'done', now
    redis.call('HDEL', state, 'next')
    redis.call('HSET', state, unpack(fields))
    for _, key in ipairs(keys) do
      redis.call('PEXPIRE', key, retention)
    end
  else
    fields[#fields + 1], fields[#fields + 2] = 'next', following
    redis.call('HSET', state, unpack(fields))
  end
  return 1
end
