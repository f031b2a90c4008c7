-- Delete a lock whoever holds it (see scripts.rs), waking its waiters on the lock's channel (lock/keys.rs): 1 when
-- there was a lock, else 0.
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call('PUBLISH', '{' .. KEYS[1] .. '}:released', '')
  return 1
end
return 0
