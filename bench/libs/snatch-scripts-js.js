'use strict'
// A reference, not a library users could pick: redis-snatch's own Lua scripts (acquire with fence, release with
// wake-up) sent from the JS thread by one node-redis client (automatic pipelining), with the same key names. It
// measures what the lock costs on Redis and on a JS-thread transport, without the native path's hops between threads
// (see bench/README.md, "What a JS-thread transport would reach"). Run it by name: `--libs snatch,scripts-js,raw`.

const fs = require('node:fs')
const path = require('node:path')
const { randomUUID } = require('node:crypto')
const { createClient } = require('redis')
const { withFnOf } = require('./with-fn')

const SCRIPTS = path.join(__dirname, '..', '..', 'crates', 'core', 'src', 'protocol', 'scripts')
// The acquire script is fence.lua's helper followed by acquire.lua, as protocol/scripts.rs joins them.
const ACQUIRE = ['fence.lua', 'acquire.lua'].map((name) => fs.readFileSync(path.join(SCRIPTS, name), 'utf8')).join('')
const RELEASE = fs.readFileSync(path.join(SCRIPTS, 'release.lua'), 'utf8')

/** A connected node-redis client with both scripts loaded; no `acquireWait` (it has no waiting). */
async function create({ url, prefix, ttl }) {
  const client = createClient({ url })
  await client.connect()
  const [acquireSha, releaseSha] = await Promise.all([client.scriptLoad(ACQUIRE), client.scriptLoad(RELEASE)])
  const tryAcquire = async (key) => {
    const lock = prefix + key
    const token = randomUUID()
    const fence = await client.evalSha(acquireSha, { keys: [lock, `{${prefix}}:fence`], arguments: [token, `${ttl}`] })
    return fence >= 0 ? { key: lock, token } : null
  }
  const release = ({ key, token }) =>
    client.evalSha(releaseSha, { keys: [key], arguments: [token] })
  return {
    tryAcquire,
    release,
    withFn: withFnOf(tryAcquire, release),
    close: () => client.close(),
  }
}

module.exports = { create }
