-- One page of a bucket's stored schedules (listSchedules; see scripts.rs, STORED_LIST): KEYS[1] is the bucket's
-- handlers, KEYS[2] one handler's due index there (or nothing: the handlers only). ARGV[1] the first rank, ARGV[2] how
-- many. Returns {handlers, ids, scores}: the handler names in use in the bucket, and that page of the index.
local handlers = redis.call('ZRANGE', KEYS[1], 0, -1)
local ids, scores = {}, {}
if KEYS[2] then
  local from = tonumber(ARGV[1])
  local page = redis.call('ZRANGE', KEYS[2], from, from + tonumber(ARGV[2]) - 1, 'WITHSCORES')
  for n = 1, #page, 2 do
    ids[#ids + 1] = page[n]
    scores[#scores + 1] = page[n + 1]
  end
end
return {handlers, ids, scores}
