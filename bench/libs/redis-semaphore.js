'use strict'
// redis-semaphore's Mutex on one ioredis client; a Mutex object per acquisition, as its README shows.

const Redis = require('ioredis')
const { Mutex } = require('redis-semaphore')
const { withFnOf } = require('./with-fn')

/**
 * Mutexes on one client. Single attempts use acquireAttemptsLimit 1 and retryInterval 0: the library sleeps
 * retryInterval after a failed attempt even when it was the last one (10 ms by default).
 */
function create({ url, prefix, ttl }) {
  const client = new Redis(url)
  const once = { lockTimeout: ttl, acquireAttemptsLimit: 1, retryInterval: 0 }
  const tryAcquire = async (key) => {
    const mutex = new Mutex(client, prefix + key, once)
    return (await mutex.tryAcquire()) ? mutex : null
  }
  const release = (mutex) => mutex.release()
  return {
    tryAcquire,
    release,
    withFn: withFnOf(tryAcquire, release),
    async acquireWait(key, wait) {
      const mutex = new Mutex(client, prefix + key, { lockTimeout: ttl, acquireTimeout: wait })
      await mutex.acquire()
      return mutex
    },
    close: () => client.quit(),
  }
}

module.exports = { create }
