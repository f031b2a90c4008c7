// The ES module entry has named exports only (like index.mjs), so its types must refuse a default import.
// @ts-expect-error no default export
import redisSnatch from 'redis-snatch'

void redisSnatch
