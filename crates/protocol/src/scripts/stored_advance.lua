-- A stored schedule's occurrence was dispatched (see scripts.rs, STORED_ADVANCE and STORED_FIRST_RECORD): `keys` are
-- its state, history, records, open attempts, registrations and triggers; `version` the version read, `due` the
-- dispatched tick (which must still be `next`), `following` the tick after it ('' for none: the schedule is
-- finished), `retention` how long a finished schedule is kept in ms, `counts` '1' when the occurrence counts (it ran
-- or was missed: not an older one superseded). A finished schedule's keys all expire after `retention`.

-- Whether the state still holds the version read, with `due` next: `advance` writes only then.
local function advanceable(state, version, due)
  local fields = redis.call('HMGET', state, 'v', 'next')
  return fields[1] == version and fields[2] == due
end

-- Returns 1 when done, 0 when the state changed meanwhile (an upsert, a removal: nothing is written). `checked`: the
-- caller found it advanceable in this script.
local function advance(keys, version, due, following, retention, counts, checked)
  local state = keys[1]
  if not (checked or advanceable(state, version, due)) then
    return 0
  end
  if counts == '1' then
    redis.call('HINCRBY', state, 'runs', 1)
  end
  if following == '' then
    local time = redis.call('TIME')
    redis.call('HDEL', state, 'next')
    redis.call('HSET', state, 'last', due, 'done', time[1] * 1000 + math.floor(time[2] / 1000))
    for _, key in ipairs(keys) do
      redis.call('PEXPIRE', key, retention)
    end
  else
    redis.call('HSET', state, 'last', due, 'next', following)
  end
  return 1
end
