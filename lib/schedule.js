'use strict'

const { EventEmitter } = require('node:events')
const { performance } = require('node:perf_hooks')
const { LIMITS, OutcomeKind } = require('./native')
const diagnostics = require('./diagnostics')
const {
  ClosedError,
  LockLostError,
  RunReplacedError,
  RunTimeoutError,
  emitError,
  fromNativeError,
  native,
} = require('./errors')
const { endError } = require('./run')

const ATTEMPTED = OutcomeKind.Attempted
const SKIPPED = OutcomeKind.Skipped
const MISSED = OutcomeKind.Missed
/** Without an 'error' listener, an outage of Redis is logged at most this often. */
const OUTAGE_LOG_INTERVAL_MS = 60_000

/**
 * What a schedule's fn receives: `fence`, `key`, `tick` (a Date), `attempt`, `why`, and a stored schedule's `id` and
 * `data`; `signal` and `validUntil` are read through its attempt (the signal made on first read).
 */
class ScheduleContext {
  #attempt

  constructor(attempt) {
    this.#attempt = attempt
    this.fence = attempt.fence
    this.key = attempt.key
    this.tick = new Date(attempt.tick)
    this.attempt = attempt.attempt
    this.why = attempt.why
    if (attempt.stored !== undefined) {
      this.id = attempt.stored.id
      this.data = attempt.stored.data
    }
  }

  /** Aborts when the attempt's lease is lost, its `timeout` passes, a later occurrence replaces it, or it is closed. */
  get signal() {
    return this.#attempt.controller().signal
  }

  /** Epoch ms until which the attempt's lease is guaranteed (now once it is lost or the run ended). */
  get validUntil() {
    return this.#attempt.validUntil()
  }
}

/** One attempt of a schedule's occurrence, run in this process: its context, and what fn did. */
class Attempt {
  #schedule
  /** Made on first read of ctx.signal, or when it aborts: most fns never look at it. */
  #controller = null
  lostPublished = false
  threw = false
  value
  error

  /**
   * Attempt `attempt` (1 for the first) of occurrence `tick` of `schedule` (of `locker`), which runs for `why`, under
   * `fence`, due to start at `due` (its tick plus its jitter offset); `validUntil()` is the end of its lease's guarantee.
   */
  constructor(schedule, locker, key, { tick, attempt, why, due, id, data }, fence, validUntil) {
    this.#schedule = schedule
    /** The stored schedule's id and data (JSON), for an occurrence of one. */
    this.stored = id === undefined || id === null ? undefined : { id, data: data == null ? null : JSON.parse(data) }
    this.validUntil = validUntil
    this.key = key
    this.tick = tick
    this.attempt = attempt
    this.why = why
    this.fence = fence
    this.acquiredAt = diagnostics.now()
    /** From when it was due (its tick, plus its jitter offset) to fn's call, in ms. */
    this.lagMs = Date.now() - due
    /** Its start as diagnostics published it (undefined when no one listened then). */
    const about = { schedule: schedule.name, tick: new Date(tick), attempt, why, fence }
    this.begun = diagnostics.begin(locker, key, 'schedule', about)
  }

  /** The AbortController of ctx.signal. */
  controller() {
    return (this.#controller ??= new AbortController())
  }

  /** Calls `fn` with the attempt's context; resolves once it settled. */
  async call(fn) {
    const { fence, key, begun } = this
    if (diagnostics.acquire.hasSubscribers) {
      diagnostics.acquire.publish({ key, fence, ms: this.lagMs, direct: false, start: begun })
    }
    const ctx = new ScheduleContext(this)
    try {
      this.value = await (begun === undefined ? fn(ctx) : diagnostics.wrapped(begun, () => fn(ctx)))
    } catch (err) {
      this.threw = true
      this.error = err
    }
  }

  /** What fn failed with, as the schedule's record keeps it (its message); undefined when it did not fail. */
  failure() {
    if (!this.threw) return undefined
    const err = this.error
    return String(err instanceof Error ? err.message : err)
  }

  /** The lease was lost while fn runs (`reason` 'stalled': see maxStall): abort its signal. */
  lost(reason) {
    this.#publishLost(reason)
    this.controller().abort(new LockLostError(this.key, { reason }))
  }

  /**
   * fn is to stop (`reason`: 'timeout', past its `timeout`; 'replaced', by a later occurrence; 'shutdown', its locker
   * closes): abort its signal.
   */
  aborted(reason) {
    this.controller().abort(this.#schedule._abortError(reason))
  }

  /**
   * The attempt ended (`kind` Attempted, `extra` its `{ ending, durationMs }`): the schedule hears of it.
   * @param {number} kind
   * @param {bigint} fence
   * @param {{ ending: string, durationMs: number }} extra
   */
  end(kind, fence, extra) {
    if (kind !== ATTEMPTED) return
    const { ending, durationMs } = extra
    const lost = ending === 'lost'
    if (lost) this.#publishLost()
    diagnostics.publishRelease(this.key, this.fence, this.acquiredAt, !lost, this.begun)
    this.#schedule._ended(this, ending, durationMs)
  }

  /** What fn did, for `endError`. */
  settled() {
    const { threw, error, value } = this
    return { signal: this.#controller?.signal, abort: (err) => this.controller().abort(err), threw, error, value }
  }

  #publishLost(reason) {
    if (!this.lostPublished) {
      this.lostPublished = diagnostics.publishLost(this.key, this.fence, this.acquiredAt, this.begun, reason)
    }
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
  /** The locker's runs, where this schedule's attempts are kept while their fn runs. */
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
  /**
   * Without an 'error' listener: Redis could not be reached for the last claim (true when that was logged,
   * 'unlogged' within a minute of the last outage logged).
   * @type {boolean | 'unlogged'}
   */
  #down = false
  /** When an outage was last logged (performance.now()), to log at most one a minute. */
  #downLoggedAt = -Infinity

  /** The attempts' `timeout` (ms), for their errors. */
  #timeout
  /** This replica's `instanceId`, for diagnostics. */
  #instance

  /**
   * @internal Built by `locker` around its native schedule: `runs`, `taskDone(id)` and `remainingMs(id)` are the
   * locker's, `forget()` takes the schedule off its list, `timeout` is the attempts' (for their errors), `instance` the
   * locker's instanceId.
   */
  constructor(name, fn, locker, nativeSchedule, { runs, taskDone, remainingMs, forget, timeout, instance }) {
    super()
    this.name = name
    this.#instance = instance
    this.#timeout = timeout
    this.#locker = locker
    this.#fn = fn
    this.#native = nativeSchedule
    this.#runs = runs
    this.#taskDone = taskDone
    this.#remainingMs = remainingMs
    this.#forget = forget
    this.#alive = setInterval(() => this, LIMITS.maxDurationMs)
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
  _attempt(id, attempt, fence) {
    this.#reached()
    const validUntil = () => Date.now() + this.#remainingMs(id)
    // A stored schedule's occurrence (this is then its handler): keyed by the schedule's id, with its id and data.
    const name = attempt.id ?? this.name
    const run = new Attempt(this, this.#locker, `${name}:${attempt.tick}`, attempt, fence, validUntil)
    this.#runs.set(id, run)
    run.call(this.#fn).then(() => this.#taskDone(id, run.failure()))
  }

  /**
   * @internal The error an attempt's signal aborts with, for `reason` ('timeout', 'replaced'; 'shutdown' when its
   * locker closed, the attempt then 'interrupted').
   */
  _abortError(reason) {
    if (reason === 'timeout') return new RunTimeoutError(this.name, this.#timeout)
    if (reason === 'replaced') return new RunReplacedError(this.name)
    return new ClosedError(`the locker closed before the attempt of '${this.name}' finished: another replica runs it again`)
  }

  /**
   * @internal An attempt ran here and ended `ending` (as its record says), its fn having taken `durationMs`: 'run'
   * when it was ok, else 'error' with what it came to (`endError`).
   */
  _ended(run, ending, durationMs) {
    const { attempt, why, key } = run
    const about = { tick: new Date(run.tick), attempt, why }
    if (run.stored !== undefined) about.id = run.stored.id
    const make = () => (ending === 'lost' ? new LockLostError(key) : this._abortError(ending))
    const failed = endError(ending, run.settled(), make)
    if (diagnostics.attempt.hasSubscribers) {
      const { fence, lagMs, begun } = run
      const instance = this.#instance
      const error = failed === null ? undefined : failed.error
      diagnostics.attempt.publish({ schedule: this.name, ...about, fence, instance, lagMs, durationMs, ending, error, start: begun })
    }
    if (failed === null) this.emit('run', { ...about, fence: run.fence, durationMs })
    else this.#error(failed.error, about)
  }

  /**
   * @internal An occurrence did not run here (`kind` Skipped or Unclaimed, with its `{ tick, reason | error }`), or
   * was recorded missed here (Missed, `{ tick, reason }`: for diagnostics only).
   */
  _told(kind, { tick, reason, error }) {
    if (kind === MISSED) {
      if (diagnostics.missed.hasSubscribers) {
        diagnostics.missed.publish({ schedule: this.name, tick: new Date(tick), reason, locker: this.#locker })
      }
      return
    }
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
