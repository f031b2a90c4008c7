'use strict'

const { invalidArg } = require('./errors')
const { checkRange, lockInit } = require('./options')

/** Checks a semaphore's `limit`: a number in the core's range. */
function checkLimit(limit) {
  if (typeof limit !== 'number') throw invalidArg(TypeError, `limit must be a number, got ${typeof limit}`)
  checkRange('limit', limit)
}

/**
 * A counting semaphore, from `Locker.semaphore()`: at most `limit` holders of `key` at once, across every process.
 * Each permit is a Lock (fence, signal, validUntil, extend, release, asyncDispose) whose expiry is judged on the
 * Redis server's clock; a release wakes the waiters.
 */
class Semaphore {
  #acquire
  #run

  /**
   * @internal Built by the Locker: `acquire(init, wait)` resolves a permit (a Lock) or null; `run(fn, options)` runs fn
   * under a permit and resolves its value.
   */
  constructor(key, limit, acquire, run) {
    this.key = key
    this.limit = limit
    this.#acquire = acquire
    this.#run = run
    Object.freeze(this)
  }

  /** Waits up to `options.wait` ms for a permit; rejects LockTimeoutError. */
  async acquire(options) {
    return this.#acquire(lockInit(options, { canWait: true }), true)
  }

  /** One attempt; `null` when `limit` permits are held. */
  async tryAcquire(options) {
    return this.#acquire(lockInit(options, { canWait: false }), false)
  }

  /**
   * Waits up to `options.wait` ms for a permit, runs `fn({ signal, fence, key })` under it (renewed while fn runs,
   * unless `autoExtend: false`), releases it, and resolves fn's value. Rejects LockTimeoutError when no permit came,
   * fn's error, or LockLostError (with fn's error as `cause` and its value as `value`) when the permit was lost.
   */
  async withPermit(fn, options) {
    return this.#run(fn, options)
  }
}

module.exports = { Semaphore, checkLimit }
