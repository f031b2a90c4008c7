'use strict'
// The floor: one ioredis client sending SET NX PX and an EVALSHA compare-and-delete, without any library logic
// (no retries, no waiting, no auto-extension). On a deployment: a Redis.Cluster (one connection per master), or
// one client over TLS.

const { randomUUID } = require('node:crypto')
const Redis = require('ioredis')
const { withFnOf } = require('./with-fn')

const RELEASE_SCRIPT = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"

/**
 * An ioredis client on `url`, or on `deployment` (`{ cluster: seeds }` or `{ url, tls: { ca } }`), with the release
 * script; no `acquireWait` (a floor has no waiting). On one server (plaintext or TLS) the script is loaded once and
 * every release is one EVALSHA; on a cluster, a command of defineCommand (EVALSHA, with EVAL the first time on each
 * node's connection and after NOSCRIPT), so that it works on whichever master has the key.
 */
async function create({ url, deployment, prefix, ttl }) {
  let client
  let release
  if (deployment?.cluster) {
    client = new Redis.Cluster(deployment.cluster)
    client.defineCommand('releaseLock', { numberOfKeys: 1, lua: RELEASE_SCRIPT })
    release = (lock) => client.releaseLock(lock.key, lock.token)
  } else {
    client = deployment ? new Redis(deployment.url, { tls: deployment.tls }) : new Redis(url)
    const sha = await client.script('LOAD', RELEASE_SCRIPT)
    release = (lock) => client.evalsha(sha, 1, lock.key, lock.token)
  }
  const tryAcquire = async (key) => {
    const token = randomUUID()
    const reply = await client.set(prefix + key, token, 'PX', ttl, 'NX')
    return reply === 'OK' ? { key: prefix + key, token } : null
  }
  return {
    tryAcquire,
    release,
    withFn: withFnOf(tryAcquire, release),
    close: () => client.quit(),
  }
}

module.exports = { create, RELEASE_SCRIPT }
