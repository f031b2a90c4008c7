'use strict'
// The lock helper that blog posts write by hand on node-redis: SET NX PX to acquire, an EVAL'd compare-and-delete
// to release, a fixed-delay retry loop to wait. Written for this benchmark; like its models, it never extends a
// lease.

const { randomUUID } = require('node:crypto')

const RELEASE_SCRIPT = `
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0`
const RETRY_DELAY_MS = 50

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** One attempt: the token to release with, or null when the key is taken. */
async function acquireLock(client, key, ttl) {
  const token = randomUUID()
  const reply = await client.set(key, token, { condition: 'NX', expiration: { type: 'PX', value: ttl } })
  return reply === 'OK' ? token : null
}

/** Retry every RETRY_DELAY_MS until the lock is ours (its token) or `wait` ms have passed (then throw). */
async function waitLock(client, key, ttl, wait) {
  const deadline = Date.now() + wait
  for (;;) {
    const token = await acquireLock(client, key, ttl)
    if (token) return token
    if (Date.now() >= deadline) throw new Error(`lock ${key} not acquired within ${wait} ms`)
    await sleep(Math.min(RETRY_DELAY_MS, deadline - Date.now()))
  }
}

/** Delete `key` if it still holds `token`; true if it did. */
async function releaseLock(client, key, token) {
  return (await client.eval(RELEASE_SCRIPT, { keys: [key], arguments: [token] })) === 1
}

/** One attempt: run `fn` under the lock and release it; `{ ran: false }` when the key is taken. */
async function withLock(client, key, ttl, fn) {
  const token = await acquireLock(client, key, ttl)
  if (!token) return { ran: false }
  try {
    return { ran: true, value: await fn() }
  } finally {
    await releaseLock(client, key, token)
  }
}

module.exports = { acquireLock, waitLock, releaseLock, withLock }
