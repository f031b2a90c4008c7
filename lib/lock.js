'use strict'

const diagnostics = require('./diagnostics')
const { LockLostError, atCaller } = require('./errors')
const { checkType } = require('./options')

/** A held lock, from `Locker.tryLock()` / `Locker.lock()`. */
class Lock {
  #ops
  #id
  /** Made on first use of `signal`: most locks are released without anyone looking at it. */
  #controller = null
  #ended = false
  #reason
  #onEnd
  /** When it was acquired, for diagnostics' `ms` (0 when no one listened then). */
  #acquiredAt
  /** Its end was published on the release channel (once per lock). */
  #releasePublished = false
  /** Its call's start as diagnostics published it (undefined when no one listened then). */
  #begun

  /**
   * @internal Built by the Locker from the outcome of its acquisition (`fence`, and the token as `extra`): `ops` runs
   * this lock's native operations (extend, release: each resolves its outcome, the answer as `extra`; remainingMs;
   * handOver: the ms of validity left, null when no longer held);
   * `begun` is its call's start (diagnostics), `onEnd` runs once when the lock is released or lost.
   */
  constructor(key, id, locked, ops, begun, onEnd) {
    this.#ops = ops
    this.#id = id
    this.#begun = begun
    this.#onEnd = onEnd
    this.#acquiredAt = diagnostics.now()
    this.key = key
    this.token = locked.extra
    this.fence = locked.fence
    Object.freeze(this)
  }

  /** Aborts when the lock is lost (reason: LockLostError) or released. */
  get signal() {
    if (this.#controller === null) {
      this.#controller = new AbortController()
      if (this.#ended) this.#controller.abort(this.#reason)
    }
    return this.#controller.signal
  }

  /** Date.now()-based estimate of the guaranteed end of the lease (now, once lost or released). */
  get validUntil() {
    return Date.now() + this.#ops.remainingMs(this.#id)
  }

  /** Sets the lease to `ttl` ms from now (default: the ttl it was acquired with); false if it was no longer ours. */
  async extend(ttl) {
    checkType('ttl', ttl, 'number')
    let ok
    try {
      ok = (await this.#ops.extend(this.#id, ttl)).extra
    } catch (err) {
      throw atCaller(err)
    }
    if (!ok) this._lost()
    return ok
  }

  /** Releases the lock (the key stays until minHold has passed); false if it was no longer ours. */
  async release() {
    let released
    try {
      released = (await this.#ops.release(this.#id)).extra
    } catch (err) {
      diagnostics.publishError(this.key, this.fence, this.#acquiredAt, err, this.#begun)
      throw atCaller(err)
    } finally {
      this.#end()
    }
    this.#publishRelease(released)
    return released
  }

  /**
   * Hands the lock over to another process, which continues it with `locker.adopt(handle)`: from now on it is neither
   * renewed nor released here (its signal aborts as on release), and keeps its key until the handle's `validUntil`
   * unless adopted. A plain object, JSON-safe: `{ key, token, fence, validUntil }`. The token lets whoever has it take
   * the lock over: pass it as you would the lock. Throws LockLostError when the lock is no longer held here.
   */
  handoff() {
    const left = this.#ended ? null : this.#ops.handOver(this.#id)
    if (left === null) throw this.#reason instanceof LockLostError ? this.#reason : new LockLostError(this.key)
    this.#publishRelease(true)
    this.#end()
    return { key: this.key, token: this.token, fence: String(this.fence), validUntil: Math.floor(Date.now() + left) }
  }

  async [Symbol.asyncDispose]() {
    await this.release()
  }

  /** @internal Invoked by the Locker when the core reports the lease lost (`reason` 'stalled': see maxStall). */
  _lost(reason) {
    if (!this.#ended) diagnostics.publishLost(this.key, this.fence, this.#acquiredAt, this.#begun, reason)
    this.#end(new LockLostError(this.key, { reason }))
  }

  /** @internal Invoked by the Locker when `close()` released the lock. */
  _released() {
    this.#publishRelease(true)
    this.#end()
  }

  /** Publishes the lock's end on the release channel, once. */
  #publishRelease(released) {
    if (this.#releasePublished) return
    this.#releasePublished = true
    diagnostics.publishRelease(this.key, this.fence, this.#acquiredAt, released, this.#begun)
  }

  #end(reason) {
    if (this.#ended) return
    this.#ended = true
    this.#reason = reason
    this.#controller?.abort(reason)
    this.#onEnd()
  }
}

module.exports = { Lock }
