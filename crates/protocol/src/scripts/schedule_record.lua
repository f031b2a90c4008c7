-- Writing the record of an attempt of an occurrence (see scripts.rs), for SCHEDULE_RECORD and SCHEDULE_END: KEYS[1]
-- is the schedule's state, KEYS[2] its history (record ids scored by tick and attempt), KEYS[3] its records (id →
-- JSON), KEYS[4] its open attempts (id → when to look at it again, server ms). ARGV[1] holds the conditions: 's',
-- written only while the schedule is not suspended; 'x', only if the state holds a stored schedule's spec (it was not
-- removed: its state, which has no TTL, is then not given one here); 'n', only if there is no record of this id yet
-- ('m' with it: or only one saying missed, which an attempt that waited in the buffer slot writes over); 'r', only if
-- the record of this id says it is running. ARGV[2] the record's id, ARGV[3] its JSON, ARGV[4] its score; ARGV[5]
-- what becomes of it among the open attempts: '' nothing, '-' it leaves them, or a number of ms from now when it is
-- to be looked at; ARGV[6] how many records are kept (the oldest are dropped); ARGV[7] how long the state and records
-- are kept in ms. ARGV[8], ARGV[9], ARGV[10], when given: the id of the attempt this one takes over, the JSON its
-- record must still have (or nothing is written), and its new JSON (the attempt leaves the open ones). A record that
-- says ok sets the state's `lastSuccess` to the server's time. KEYS[5] to KEYS[4 + locks]: locks the attempt must
-- still hold (its claim and the buffer slot it waited in), their owners the last of the record's `argc` ARGVs, in
-- order. With `ttls_set`, the keys' TTLs are left to the caller; a finished stored schedule's (its state has `done`)
-- are those its finish set, but for a new entry among its open attempts. `read`, when given: the state's `spec`,
-- `suspended` and `done`, which the caller read in this script. Answers 1 when written, 0 when the schedule is
-- suspended, -1 when a condition did not hold; then, when written, the server's time in ms.
local function write_record(locks, argc, ttls_set, read)
  local state, history, records, open = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
  local conditions, id = ARGV[1], ARGV[2]
  local function wants(flag)
    return string.find(conditions, flag, 1, true) ~= nil
  end
  for n = 1, locks do
    local held, owner = redis.call('GET', KEYS[4 + n]), ARGV[argc - locks + n]
    if held ~= owner and held ~= owner .. '*' then
      return -1
    end
  end
  local stored, finished = wants('x'), false
  if stored or wants('s') then
    local found = read or redis.call('HMGET', state, 'spec', 'suspended', 'done')
    if stored and not found[1] then
      return -1
    end
    if wants('s') and found[2] then
      return 0
    end
    finished = stored and found[3] ~= false
  end
  local current = redis.call('HGET', records, id)
  if wants('n') and current and not (wants('m') and string.find(current, '"outcome":"missed"', 1, true)) then
    return -1
  end
  if wants('r') and not (current and string.find(current, '"outcome":"running"', 1, true)) then
    return -1
  end
  local previous = argc - locks >= 10 and ARGV[8] or nil
  if previous and redis.call('HGET', records, previous) ~= ARGV[9] then
    return -1
  end
  local time = redis.call('TIME')
  local now = time[1] * 1000 + math.floor(time[2] / 1000)
  redis.call('HSET', records, id, ARGV[3])
  if string.find(ARGV[3], '"outcome":"ok"', 1, true) then
    redis.call('HSET', state, 'lastSuccess', now)
  end
  -- A record said running (`r`) has its entry in the history already: an attempt's end writes over its start.
  local added = wants('r') and 0 or redis.call('ZADD', history, ARGV[4], id)
  if ARGV[5] == '-' then
    redis.call('ZREM', open, id)
  elseif ARGV[5] ~= '' then
    redis.call('ZADD', open, now + tonumber(ARGV[5]), id)
  end
  if previous then
    redis.call('HSET', records, previous, ARGV[10])
    redis.call('ZREM', open, previous)
  end
  -- Only a new record makes the history longer (an attempt's end writes over its start).
  local excess = added > 0 and redis.call('ZCARD', history) - tonumber(ARGV[6]) or 0
  if excess > 0 then
    local old = redis.call('ZRANGE', history, 0, excess - 1)
    redis.call('ZREMRANGEBYRANK', history, 0, excess - 1)
    redis.call('HDEL', records, unpack(old))
    redis.call('ZREM', open, unpack(old))
  end
  if finished then
    if ARGV[5] ~= '-' and ARGV[5] ~= '' then
      redis.call('PEXPIRE', open, ARGV[7])
    end
  elseif not ttls_set then
    for n = stored and 2 or 1, 4 do
      redis.call('PEXPIRE', KEYS[n], ARGV[7])
    end
  end
  return 1, now
end
