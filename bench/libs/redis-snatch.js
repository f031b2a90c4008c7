'use strict'
// redis-snatch, the package under test (the built module in the package root).

const { createLocker } = require('../..')

/** One Locker on `url`; tryLock/release, snatchTask, lock with `wait`. */
function create({ url, prefix, ttl }) {
  const locker = createLocker({ url, prefix, ttl })
  return {
    tryAcquire: (key) => locker.tryLock(key),
    release: (lock) => lock.release(),
    withFn: async (key, fn) => (await locker.snatchTask(key, fn)).ran,
    acquireWait: (key, wait) => locker.lock(key, { wait }),
    close: () => locker.close(),
  }
}

module.exports = { create }
