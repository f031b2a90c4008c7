'use strict'

const { EventEmitter } = require('node:events')
const { performance } = require('node:perf_hooks')
const { OutcomeKind } = require('../binding')
const diagnostics = require('./diagnostics')
const { LockLostError, fromNativeError, native } = require('./errors')

const RAN = OutcomeKind.Ran
const SKIPPED = OutcomeKind.Skipped

/** One occurrence's run of a schedule's fn, in this process: its context, and what fn came to. */
class Occurrence {
  #schedule
  controller = new AbortController()
  lostPublished = false
  threw = false
  value
  error

  constructor(schedule, key, tick, fence) {
    this.#schedule = schedule
    this.key = key
    this.tick = tick
    this.fence = fence
    this.acquiredAt = diagnostics.now()
    this.startedAt = performance.now()
    this.durationMs = 0
  }

  /** Calls `fn` with the occurrence's context; resolves once it settled. */
  async call(fn) {
    const { controller, fence, key, tick } = this
    if (diagnostics.acquire.hasSubscribers) diagnostics.acquire.publish({ key, fence, ms: Date.now() - tick })
    try {
      this.value = await fn({ signal: controller.signal, fence, key, tick: new Date(tick) })
    } catch (err) {
      this.threw = true
      this.error = err
    }
    this.durationMs = performance.now() - this.startedAt
  }

  /** The lease was lost while fn runs: abort its signal. */
  lost() {
    this.#publishLost()
    this.controller.abort(new LockLostError(this.key))
  }

  /** The run ended (`kind` Ran, with `lost` as `extra`): the schedule hears of it. */
  end(kind, fence, lost) {
    if (kind !== RAN) return
    if (lost) this.#publishLost()
    diagnostics.publishRelease(this.key, this.fence, this.acquiredAt, !lost)
    this.#schedule._ran(this, lost)
  }

  #publishLost() {
    if (!this.lostPublished) this.lostPublished = diagnostics.publishLost(this.key, this.fence, this.acquiredAt)
  }
}

/**
 * A cluster-safe cron schedule, from `Locker.schedule()`. Events: 'run' { tick, fence, durationMs } after fn
 * resolved; 'skip' { tick, reason: 'taken' | 'overlap' }; 'error' (err, { tick }) when fn threw or rejected, its
 * lease was lost (LockLostError with fn's value), or claiming the occurrence failed (RedisError, QuorumError). An
 * active schedule keeps the process alive, as a timer would.
 */
class ScheduledTask extends EventEmitter {
  /** The Locker: a schedule keeps it alive, as a collected Locker closes (stopping its schedules). */
  #locker
  #native
  #fn
  /** The locker's runs, where this schedule's occurrences are kept while their fn runs. */
  #runs
  /** Tells the native side that the fn of run `id` has settled. */
  #taskDone
  /** Takes the schedule off the locker's list. */
  #forget
  /** Keeps the process, and through this schedule its locker, alive until the schedule ends. */
  #alive
  #warned = false

  /** @internal Built by `locker` around its native schedule. */
  constructor(name, fn, locker, nativeSchedule, runs, taskDone, forget) {
    super()
    this.name = name
    this.#locker = locker
    this.#fn = fn
    this.#native = nativeSchedule
    this.#runs = runs
    this.#taskDone = taskDone
    this.#forget = forget
    this.#alive = setInterval(() => this, 2 ** 31 - 1)
  }

  /** No new occurrences; resolves once a running fn has settled. */
  async stop() {
    await native(this.#native.stop())
    this._closed()
  }

  /** @internal The schedule ended (stopped, or its locker closed). */
  _closed() {
    clearInterval(this.#alive)
    this.#forget()
  }

  /** @internal The native side calls the fn of occurrence `tickMs` as run `id`, under `fence`. */
  _occurrence(id, tickMs, fence) {
    const occurrence = new Occurrence(this, `${this.name}:${tickMs}`, tickMs, fence)
    this.#runs.set(id, occurrence)
    occurrence.call(this.#fn).then(() => this.#taskDone(id))
  }

  /** @internal An occurrence ran: 'run', or 'error' when fn failed or its lease lapsed (`lost`). */
  _ran(occurrence, lost) {
    const tick = new Date(occurrence.tick)
    if (lost) {
      const err = occurrence.controller.signal.reason ?? new LockLostError(occurrence.key)
      occurrence.controller.abort(err)
      if (occurrence.threw && occurrence.error !== err) err.cause = occurrence.error
      err.value = occurrence.value
      this.#error(err, tick)
    } else if (occurrence.threw) {
      this.#error(occurrence.error, tick)
    } else {
      this.emit('run', { tick, fence: occurrence.fence, durationMs: occurrence.durationMs })
    }
  }

  /** @internal An occurrence did not run here (`kind` Skipped or Unclaimed, with its `{ tick, reason | error }`). */
  _told(kind, { tick, reason, error }) {
    if (kind === SKIPPED) {
      this.emit('skip', { tick: new Date(tick), reason })
      return
    }
    const err = fromNativeError(error)
    if (diagnostics.error.hasSubscribers) {
      diagnostics.error.publish({ key: `${this.name}:${tick}`, ms: Date.now() - tick, error: err })
    }
    this.#error(err, new Date(tick))
  }

  /** Emits 'error'; without a listener, logs the first one to stderr instead of crashing the process. */
  #error(err, tick) {
    if (this.listenerCount('error') > 0) {
      this.emit('error', err, { tick })
    } else if (!this.#warned) {
      this.#warned = true
      console.error(`redis-snatch: schedule '${this.name}' failed at ${tick.toISOString()} (no 'error' listener):`, err)
    }
  }
}

module.exports = { ScheduledTask }
