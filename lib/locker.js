'use strict'

const { NativeLocker } = require('../binding')
const { LockLostError, native, fromNative } = require('./errors')
const { KeepAlive } = require('./keep-alive')
const { Lock } = require('./lock')
const { lockerInit, lockInit, scheduleInit, checkKey, checkFn, checkType } = require('./options')
const { ScheduledTask } = require('./schedule')

/** Acquires locks and runs tasks under them, on one Redis (`url`) or a Redlock set (`urls`). */
class Locker {
  #native
  /** Acquisition id → what to do when the core reports the lease of a running task lost. */
  #runs = new Map()
  /** Acquisition id → a Lock not yet released or lost. */
  #locks = new Map()
  #nextId = 1
  #keepAlive = new KeepAlive()

  constructor(options) {
    const init = lockerInit(options)
    const [runs, locks] = [this.#runs, this.#locks]
    try {
      // The callback holds the maps, not the Locker, so an unclosed Locker can still be collected.
      this.#native = new NativeLocker(init, (id) => {
        if (runs.has(id)) runs.get(id)()
        else locks.get(id)?._lost()
      })
    } catch (err) {
      throw fromNative(err)
    }
  }

  /** One attempt: if this process wins `key`, run `fn`, release, resolve `{ ran: true, value, fence }`; else `{ ran: false }`. */
  async snatchTask(key, fn, options) {
    const outcome = await this.#run(key, fn, lockInit(options, { autoExtend: true, canWait: false }), false)
    return outcome ?? { ran: false }
  }

  /** Waits up to `options.wait` ms for `key`, runs `fn`, releases; resolves fn's value, rejects LockTimeoutError. */
  async withLock(key, fn, options) {
    const outcome = await this.#run(key, fn, lockInit(options, { autoExtend: true, canWait: true }), true)
    return outcome.value
  }

  /** One attempt; `null` when the key is held by someone else. */
  async tryLock(key, options) {
    checkKey(key)
    const id = this.#nextId++
    const init = lockInit(options, { autoExtend: false, canWait: false })
    return this.#adopt(id, init, await native(this.#native.tryLock(key, id, init)))
  }

  /** Waits up to `options.wait` ms for `key`; rejects LockTimeoutError. */
  async lock(key, options) {
    checkKey(key)
    const id = this.#nextId++
    const init = lockInit(options, { autoExtend: false, canWait: true })
    return this.#adopt(id, init, await native(this.#native.lock(key, id, init)))
  }

  /**
   * Runs `fn` at every occurrence of `cron` (5 or 6 fields, or a macro like '@hourly') on exactly one replica.
   * Options: `ttl` (lease of each run, renewed while fn runs), `timezone` (IANA, default 'UTC').
   */
  schedule(name, cron, fn, options) {
    checkKey(name)
    checkType('cron', cron, 'string')
    checkFn(fn)
    const init = scheduleInit(options)
    return new ScheduledTask(name, fn, (task, onEvent) => {
      try {
        return this.#native.schedule(name, cron, init, task, onEvent)
      } catch (err) {
        throw fromNative(err)
      }
    })
  }

  /** Stops schedules, waits for running tasks, releases every lock still held, closes the connections. Idempotent. */
  async close() {
    await native(this.#native.close())
    for (const lock of this.#locks.values()) lock._released()
  }

  /** Wraps a native lock; one renewed in the background keeps the process alive until it ends. */
  #adopt(id, init, nativeLock) {
    if (nativeLock === null) return null
    if (init.autoExtend) this.#keepAlive.hold()
    const lock = new Lock(nativeLock, () => {
      this.#locks.delete(id)
      if (init.autoExtend) this.#keepAlive.drop()
    })
    this.#locks.set(id, lock)
    return lock
  }

  /** Runs `fn` under `key`; undefined when not acquired (and not `required`). */
  async #run(key, fn, init, required) {
    checkKey(key)
    checkFn(fn)
    const id = this.#nextId++
    const controller = new AbortController()
    const lost = () => controller.signal.reason ?? new LockLostError(key)
    this.#runs.set(id, () => controller.abort(lost()))
    const settled = {}
    const task = async (fence) => {
      try {
        settled.value = await fn({ signal: controller.signal, fence, key })
      } catch (err) {
        settled.threw = true
        settled.error = err
      }
    }
    let result
    try {
      result = await native(this.#native.run(key, id, init, required, task))
    } finally {
      this.#runs.delete(id)
    }
    if (result === null) return undefined
    if (result.lost) {
      const err = lost()
      controller.abort(err)
      if (settled.threw && settled.error !== err) err.cause = settled.error
      err.value = settled.value
      throw err
    }
    if (settled.threw) throw settled.error
    return { ran: true, value: settled.value, fence: result.fence }
  }
}

module.exports = { Locker }
