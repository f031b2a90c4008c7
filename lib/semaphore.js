'use strict'

const { LockLostError, invalidArg } = require('./errors')
const { lockInit, checkFn } = require('./options')

/** The greatest `limit`: what a signed 32-bit count holds. */
const MAX_LIMIT = 2 ** 31 - 1

/** Checks a semaphore's `limit`: an integer in [1, MAX_LIMIT]. */
function checkLimit(limit) {
  if (typeof limit !== 'number') throw invalidArg(TypeError, `limit must be a number, got ${typeof limit}`)
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_LIMIT) {
    throw invalidArg(RangeError, `limit must be an integer in [1, ${MAX_LIMIT}], got ${limit}`)
  }
}

/**
 * A counting semaphore, from `Locker.semaphore()`: at most `limit` holders of `key` at once, across every process.
 * Each permit is a Lock (fence, signal, validUntil, extend, release, asyncDispose) whose expiry is judged on the
 * Redis server's clock; a release wakes the waiters.
 */
class Semaphore {
  #acquire

  /** @internal Built by the Locker: `acquire(init, wait)` resolves a permit (a Lock) or null. */
  constructor(key, limit, acquire) {
    this.key = key
    this.limit = limit
    this.#acquire = acquire
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
    return withHeld(this.key, this.#acquire, fn, options)
  }
}

/**
 * Waits up to `options.wait` ms for a lock by `acquire(init, wait)` (a permit, a read or a write lock), runs
 * `fn({ signal, fence, key })` under it (renewed while fn runs, unless `autoExtend: false`), releases it, and
 * resolves fn's value; fn's error, or LockLostError (fn's error as `cause`, its value as `value`) when it was lost.
 */
async function withHeld(key, acquire, fn, options) {
  checkFn(fn)
  const init = lockInit(options, { canWait: true })
  const held = await acquire({ ...init, autoExtend: init?.autoExtend ?? true }, true)
  let value, error
  let threw = false
  try {
    value = await fn({ signal: held.signal, fence: held.fence, key })
  } catch (err) {
    threw = true
    error = err
  }
  const lost = held.signal.aborted || held.validUntil <= Date.now()
  await held.release().catch(() => {
    // As for a task's lock: a release that fails leaves the lock to expire with its lease.
  })
  if (lost) {
    const err = held.signal.reason instanceof LockLostError ? held.signal.reason : new LockLostError(key)
    if (threw && error !== err) err.cause = error
    err.value = value
    throw err
  }
  if (threw) throw error
  return value
}

module.exports = { Semaphore, checkLimit, withHeld }
