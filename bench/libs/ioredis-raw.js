'use strict'
// The floor: one ioredis client sending SET NX PX and an EVALSHA compare-and-delete, without any library logic
// (no retries, no waiting, no auto-extension).

const { randomUUID } = require('node:crypto')
const Redis = require('ioredis')
const { withFnOf } = require('./with-fn')

const RELEASE_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

/** An ioredis client with the release script loaded; no `acquireWait` (a floor has no waiting). */
async function create({ url, prefix, ttl }) {
  const client = new Redis(url)
  const sha = await client.script('LOAD', RELEASE_SCRIPT)
  const tryAcquire = async (key) => {
    const token = randomUUID()
    const reply = await client.set(prefix + key, token, 'PX', ttl, 'NX')
    return reply === 'OK' ? { key: prefix + key, token } : null
  }
  const release = (lock) => client.evalsha(sha, 1, lock.key, lock.token)
  return {
    tryAcquire,
    release,
    withFn: withFnOf(tryAcquire, release),
    close: () => client.quit(),
  }
}

module.exports = { create, RELEASE_SCRIPT }
