-- Who leads (lead.rs): the value of the leader's lock, its lease left in ms, and the term kept beside it.
-- KEYS: the lock, the term key. Returns {value, pttl, term}: '' for a value or a term that is not there.
local value = redis.call('GET', KEYS[1])
if not value then
  return {'', -2, ''}
end
return {value, redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[2]) or ''}
