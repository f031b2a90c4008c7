'use strict'
// redis-snatch, the package under test (the built module in the package root), or another build of it for an
// interleaved before/after comparison (the `snatch-base` entry: the package at SNATCH_BASE).

const path = require('node:path')

/**
 * One Locker on `url`, or on `deployment` when given (createLocker's connection options: `{ cluster }` or
 * `{ url, tls }`), from the package root, or with `base` from the package at SNATCH_BASE; tryLock/release,
 * snatchTask, lock with `wait`.
 */
function create({ url, deployment, prefix, ttl, base = false }) {
  if (base && !process.env.SNATCH_BASE) throw new Error('snatch-base needs SNATCH_BASE: the directory of another build')
  const { createLocker } = require(base ? path.resolve(process.env.SNATCH_BASE) : path.join(__dirname, '..', '..'))
  const locker = createLocker({ ...(deployment || { url }), prefix, ttl })
  return {
    tryAcquire: (key) => locker.tryLock(key),
    release: (lock) => lock.release(),
    withFn: async (key, fn) => (await locker.snatchTask(key, fn)).ran,
    acquireWait: (key, wait) => locker.lock(key, { wait }),
    close: () => locker.close(),
  }
}

module.exports = { create }
