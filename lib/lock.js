'use strict'

const { LockLostError, native } = require('./errors')
const { checkType } = require('./options')

/** A held lock, from `Locker.tryLock()` / `Locker.lock()`. */
class Lock {
  #native
  #controller = new AbortController()
  #onEnd

  /** @internal Built by the Locker; `onEnd` runs once when the lock is released or lost. */
  constructor(nativeLock, onEnd) {
    this.#native = nativeLock
    this.#onEnd = onEnd
    this.key = nativeLock.key
    this.token = nativeLock.token
    this.fence = nativeLock.fence
    Object.freeze(this)
  }

  /** Aborts when the lock is lost (reason: LockLostError) or released. */
  get signal() {
    return this.#controller.signal
  }

  /** Date.now()-based estimate of the guaranteed end of the lease (now, once lost or released). */
  get validUntil() {
    return Date.now() + this.#native.remainingMs()
  }

  /** Sets the lease to `ttl` ms from now (default: the ttl it was acquired with); false if it was no longer ours. */
  async extend(ttl) {
    checkType('ttl', ttl, 'number')
    const ok = await native(this.#native.extend(ttl))
    if (!ok) this._lost()
    return ok
  }

  /** Releases the lock (the key stays until minHold has passed); false if it was no longer ours. */
  async release() {
    try {
      return await native(this.#native.release())
    } finally {
      this.#end()
    }
  }

  async [Symbol.asyncDispose]() {
    await this.release()
  }

  /** @internal Called by the Locker when the core reports the lease lost. */
  _lost() {
    this.#end(new LockLostError(this.key))
  }

  /** @internal Called by the Locker when `close()` released the lock. */
  _released() {
    this.#end()
  }

  #end(reason) {
    if (this.#controller.signal.aborted) return
    this.#controller.abort(reason)
    this.#onEnd()
  }
}

module.exports = { Lock }
