'use strict'
// The hand-written helper of blog posts (peers/redis-helper.js) on one node-redis client.

const { createClient } = require('redis')
const helper = require('../peers/redis-helper')

/** A connected node-redis client driven through the helper. */
async function create({ url, prefix, ttl }) {
  const client = createClient({ url })
  await client.connect()
  const lock = (key, token) => (token ? { key, token } : null)
  return {
    tryAcquire: async (key) => lock(prefix + key, await helper.acquireLock(client, prefix + key, ttl)),
    release: ({ key, token }) => helper.releaseLock(client, key, token),
    withFn: async (key, fn) => (await helper.withLock(client, prefix + key, ttl, fn)).ran,
    acquireWait: async (key, wait) => lock(prefix + key, await helper.waitLock(client, prefix + key, ttl, wait)),
    close: () => client.close(),
  }
}

module.exports = { create }
