'use strict'

const { invalidArg } = require('./errors')
const { LIMITS } = require('./native')
const { checkKey } = require('./options')

/** A set of locks held together, from `Locker.lockAll()`: every key, or none. */
class MultiLock {
  #locks
  #controller = null

  /** @internal Built by the Locker from the Locks of `keys`, in their order. */
  constructor(keys, locks) {
    this.#locks = locks
    this.keys = keys
    this.fences = locks.map((lock) => lock.fence)
    Object.freeze(this.keys)
    Object.freeze(this.fences)
    Object.freeze(this)
  }

  /** Aborts when any of the locks is lost (with its LockLostError), or when the set is released. */
  get signal() {
    if (this.#controller === null) {
      const controller = (this.#controller = new AbortController())
      const ended = this.#locks.find((lock) => lock.signal.aborted)
      if (ended) controller.abort(ended.signal.reason)
      for (const lock of this.#locks) {
        lock.signal.addEventListener('abort', () => controller.abort(lock.signal.reason), { once: true })
      }
    }
    return this.#controller.signal
  }

  /** Date.now()-based estimate of the guaranteed end of the set: its earliest lease's. */
  get validUntil() {
    return Math.min(...this.#locks.map((lock) => lock.validUntil))
  }

  /** Sets every lease to `ttl` ms from now (default: the ttl they were acquired with); false if any was no longer ours. */
  async extend(ttl) {
    const extended = await Promise.all(this.#locks.map((lock) => lock.extend(ttl)))
    return extended.every(Boolean)
  }

  /** Releases every lock of the set; false if any was no longer ours. */
  async release() {
    const released = await Promise.allSettled(this.#locks.map((lock) => lock.release()))
    const failed = released.find((r) => r.status === 'rejected')
    if (failed) throw failed.reason
    return released.every((r) => r.status === 'fulfilled' && r.value)
  }

  async [Symbol.asyncDispose]() {
    await this.release()
  }

}

/** Checks the keys of a set: an array of 1 to LIMITS.maxSetKeys valid keys (none twice: checked natively). A copy. */
function checkKeys(keys) {
  if (!Array.isArray(keys)) throw invalidArg(TypeError, `keys must be an array of keys, got ${typeof keys}`)
  if (keys.length === 0 || keys.length > LIMITS.maxSetKeys) {
    throw invalidArg(RangeError, `keys must hold 1 to ${LIMITS.maxSetKeys} keys, got ${keys.length}`)
  }
  const copy = [...keys]
  copy.forEach(checkKey)
  return copy
}

module.exports = { MultiLock, checkKeys }
