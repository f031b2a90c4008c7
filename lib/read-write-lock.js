'use strict'

const { lockInit } = require('./options')

/**
 * A read-write lock, from `Locker.rwlock()`: many readers or one writer of `key` at once, across every process. Each
 * read or write lock is a Lock (fence, signal, validUntil, extend, release, asyncDispose) whose expiry is judged on
 * the Redis server's clock. A writer that waits keeps new readers out, so a stream of readers cannot starve it.
 */
class ReadWriteLock {
  #acquire
  #run

  /**
   * @internal Built by the Locker: `acquire(write, init, wait)` resolves a Lock or null; `run(write, fn, options)` runs
   * fn under the write lock or a read lock and resolves its value.
   */
  constructor(key, acquire, run) {
    this.key = key
    this.#acquire = acquire
    this.#run = run
    Object.freeze(this)
  }

  /** Waits up to `options.wait` ms for a read lock; rejects LockTimeoutError. */
  async read(options) {
    return this.#acquire(false, lockInit(options, { canWait: true }), true)
  }

  /** Waits up to `options.wait` ms for the write lock; rejects LockTimeoutError. */
  async write(options) {
    return this.#acquire(true, lockInit(options, { canWait: true }), true)
  }

  /** One attempt at a read lock; `null` while a writer holds the lock or waits for it. */
  async tryRead(options) {
    return this.#acquire(false, lockInit(options, { canWait: false }), false)
  }

  /** One attempt at the write lock; `null` while another writer or any reader holds it. */
  async tryWrite(options) {
    return this.#acquire(true, lockInit(options, { canWait: false }), false)
  }

  /** Runs `fn({ signal, fence, key })` under a read lock, as `Semaphore.withPermit` runs it under a permit. */
  async withRead(fn, options) {
    return this.#run(false, fn, options)
  }

  /** Runs `fn({ signal, fence, key })` under the write lock, as `Semaphore.withPermit` runs it under a permit. */
  async withWrite(fn, options) {
    return this.#run(true, fn, options)
  }
}

module.exports = { ReadWriteLock }
