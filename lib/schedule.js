'use strict'

const { EventEmitter } = require('node:events')
const { performance } = require('node:perf_hooks')
const { OutcomeKind } = require('./native')
const diagnostics = require('./diagnostics')
const { LockLostError, RunReplacedError, RunTimeoutError, emitError, fromNativeError, native } = require('./errors')

const RAN = OutcomeKind.Ran
const SKIPPED = OutcomeKind.Skipped
/** Without an 'error' listener, an outage of Redis is logged at most this often. */
const OUTAGE_LOG_INTERVAL_MS = 60_000

/** One attempt of a schedule's occurrence, run in this process: its context, and what fn came to. */
class Occurrence {
  #schedule
  controller = new AbortController()
  lostPublished = false
  threw = false
  value
  error

  /**
   * Attempt `attempt` (1 for the first) of occurrence `tick`, which runs for `why`, under `fence`; `validUntil()` is
   * the end of its lease's guarantee.
   */
  constructor(schedule, key, { tick, attempt, why }, fence, validUntil) {
    this.#schedule = schedule
    this.validUntil = validUntil
    this.key = key
    this.tick = tick
    this.attempt = attempt
    this.why = why
    this.fence = fence
    this.acquiredAt = diagnostics.now()
    this.startedAt = performance.now()
    this.durationMs = 0
  }

  /** Calls `fn` with the occurrence's context; resolves once it settled. */
  async call(fn) {
    const { controller, fence, key, tick, attempt, why, validUntil } = this
    if (diagnostics.acquire.hasSubscribers) diagnostics.acquire.publish({ key, fence, ms: Date.now() - tick, direct: false })
    const ctx = {
      signal: controller.signal,
      fence,
      key,
      tick: new Date(tick),
      attempt,
      why,
      get validUntil() {
        return validUntil()
      },
    }
    try {
      this.value = await fn(ctx)
    } catch (err) {
      this.threw = true
      this.error = err
    }
    this.durationMs = performance.now() - this.startedAt
  }

  /** What fn failed with, as the schedule's record keeps it (its message); undefined when it did not fail. */
  failure() {
    if (!this.threw) return undefined
    const err = this.error
    return String(err instanceof Error ? err.message : err)
  }

  /** The lease was lost while fn runs: abort its signal. */
  lost() {
    this.#publishLost()
    this.controller.abort(new LockLostError(this.key))
  }

  /** fn is to stop (`reason`: 'timeout', past its `timeout`; 'replaced', by a later occurrence): abort its signal. */
  aborted(reason) {
    this.controller.abort(this.#schedule._abortError(reason))
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
 * A cluster-safe cron schedule, from `Locker.schedule()`. Events, for the attempts run here: 'run' { tick, fence,
 * durationMs, attempt, why } after fn resolved; 'error' (err, { tick, attempt, why }) when fn threw or rejected, its
 * `timeout` passed (RunTimeoutError), a later occurrence replaced it (RunReplacedError), its lease was lost
 * (LockLostError with fn's value), or claiming an occurrence failed (RedisError, QuorumError); and for on-time
 * occurrences not run here, 'skip' { tick, reason: 'taken' | 'overlap' | 'suspended' }. An active schedule keeps the
 * process alive, as a timer would.
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
  /** How long the lease of run `id` is still guaranteed. */
  #remainingMs
  /** Takes the schedule off the locker's list. */
  #forget
  /** Keeps the process, and through this schedule its locker, alive until the schedule ends. */
  #alive
  /** Whether the failure of an attempt was logged (without an 'error' listener, the first one is). */
  #warned = false
  /** Without an 'error' listener: Redis could not be reached for the last claim, and that was logged. */
  #down = false
  /** When an outage was last logged (performance.now()), to log at most one a minute. */
  #downLoggedAt = -Infinity

  /** The attempts' `timeout` (ms), for their errors. */
  #timeout

  /**
   * @internal Built by `locker` around its native schedule: `runs`, `taskDone(id)` and `remainingMs(id)` are the
   * locker's, `forget()` takes the schedule off its list, `timeout` is the attempts' (for their errors).
   */
  constructor(name, fn, locker, nativeSchedule, { runs, taskDone, remainingMs, forget, timeout }) {
    super()
    this.name = name
    this.#timeout = timeout
    this.#locker = locker
    this.#fn = fn
    this.#native = nativeSchedule
    this.#runs = runs
    this.#taskDone = taskDone
    this.#remainingMs = remainingMs
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

  /** @internal The native side calls the fn of an attempt (`{ tick, attempt, why }`) as run `id`, under `fence`. */
  _occurrence(id, attempt, fence) {
    this.#reached()
    const validUntil = () => Date.now() + this.#remainingMs(id)
    const occurrence = new Occurrence(this, `${this.name}:${attempt.tick}`, attempt, fence, validUntil)
    this.#runs.set(id, occurrence)
    occurrence.call(this.#fn).then(() => this.#taskDone(id, occurrence.failure()))
  }

  /** @internal The error an attempt's signal aborts with, for `reason` ('timeout' or 'replaced'). */
  _abortError(reason) {
    return reason === 'timeout' ? new RunTimeoutError(this.name, this.#timeout) : new RunReplacedError(this.name)
  }

  /** @internal An occurrence ran: 'run', or 'error' when fn failed or its lease lapsed (`lost`). */
  _ran(occurrence, lost) {
    const { attempt, why, controller } = occurrence
    const about = { tick: new Date(occurrence.tick), attempt, why }
    const aborted = controller.signal.aborted && !(controller.signal.reason instanceof LockLostError)
    if (lost || aborted) {
      // Lost, timed out or replaced: the signal's reason (made now for a loss noticed only at the end).
      const err = controller.signal.reason ?? new LockLostError(occurrence.key)
      controller.abort(err)
      if (occurrence.threw && occurrence.error !== err) err.cause = occurrence.error
      err.value = occurrence.value
      this.#error(err, about)
    } else if (occurrence.threw) {
      this.#error(occurrence.error, about)
    } else {
      this.emit('run', { ...about, fence: occurrence.fence, durationMs: occurrence.durationMs })
    }
  }

  /** @internal An occurrence did not run here (`kind` Skipped or Unclaimed, with its `{ tick, reason | error }`). */
  _told(kind, { tick, reason, error }) {
    if (kind === SKIPPED) {
      this.#reached()
      this.emit('skip', { tick: new Date(tick), reason })
      return
    }
    const err = fromNativeError(error)
    if (diagnostics.error.hasSubscribers) {
      diagnostics.error.publish({ key: `${this.name}:${tick}`, ms: Date.now() - tick, error: err })
    }
    const about = { tick: new Date(tick), attempt: 1, why: 'on-time' }
    if (this.listenerCount('error') > 0) {
      this.emit('error', err, about)
    } else if (!this.#down) {
      // Claiming failed on Redis: logged once when it starts (at most once a minute), and once when it is over.
      this.#down = true
      if (performance.now() - this.#downLoggedAt >= OUTAGE_LOG_INTERVAL_MS) {
        this.#downLoggedAt = performance.now()
        console.error(
          `redis-snatch: schedule '${this.name}' cannot claim its occurrences, from ${about.tick.toISOString()} on ` +
            `(no 'error' listener; said again when it can): ${err.message}`,
        )
      } else {
        this.#down = 'unlogged'
      }
    }
  }

  /** Redis answered a claim: the end of an outage logged without an 'error' listener is logged. */
  #reached() {
    if (this.#down === true) console.error(`redis-snatch: schedule '${this.name}' claims its occurrences again`)
    this.#down = false
  }

  /** Emits 'error'; without a listener, logs the first one to stderr instead of crashing the process. */
  #error(err, about) {
    const what = `schedule '${this.name}' failed at ${about.tick.toISOString()}`
    this.#warned = emitError(this, this.#warned, what, err, about)
  }
}

module.exports = { ScheduledTask }
