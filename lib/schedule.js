'use strict'

const { EventEmitter } = require('node:events')
const diagnostics = require('./diagnostics')
const { ClosedError, LockLostError, fromNativeError, native } = require('./errors')

/** Publishes the loss of `run`'s lease, once. */
function publishLost(run) {
  if (!run.lostPublished) run.lostPublished = diagnostics.publishLost(run.key, run.fence, run.acquiredAt)
}

/** Publishes the end of `run`: its loss first if `lost` and not published yet, then the release. */
function publishEnd(run, lost) {
  if (lost) publishLost(run)
  diagnostics.publishRelease(run.key, run.fence, run.acquiredAt, !lost)
}

/**
 * A cluster-safe cron schedule, from `Locker.schedule()`. Events: 'run' { tick, fence, durationMs } after fn
 * resolved; 'skip' { tick, reason: 'taken' | 'overlap' }; 'error' (err, { tick }) when fn threw or rejected, its
 * lease was lost (LockLostError with fn's value), or claiming the occurrence failed (RedisError, QuorumError).
 */
class ScheduledTask extends EventEmitter {
  /** The Locker: a schedule keeps it alive, as a collected Locker closes (stopping its schedules). */
  #locker
  #native
  #fn
  /** Occurrence (epoch ms) → the state of its run in this process. */
  #runs = new Map()
  #warned = false

  /** @internal Built by `locker`; `start(task, onEvent)` starts the native schedule. */
  constructor(name, fn, locker, start) {
    super()
    this.name = name
    this.#locker = locker
    this.#fn = fn
    this.#native = start(
      (tick, fence) => this.#run(tick, fence),
      (event) => this.#onEvent(event),
    )
  }

  /** No new occurrences; resolves once a running fn has settled. */
  async stop() {
    await native(this.#native.stop())
  }

  async #run(tickMs, fence) {
    const key = `${this.name}:${tickMs}`
    const run = { controller: new AbortController(), key, fence, acquiredAt: diagnostics.now(), lostPublished: false }
    this.#runs.set(tickMs, run)
    if (diagnostics.acquire.hasSubscribers) diagnostics.acquire.publish({ key, fence, ms: Date.now() - tickMs })
    try {
      run.value = await this.#fn({ signal: run.controller.signal, fence, key, tick: new Date(tickMs) })
    } catch (err) {
      run.threw = true
      run.error = err
    }
  }

  #onEvent(event) {
    const tick = new Date(event.tick)
    if (event.kind === 'skip') {
      this.emit('skip', { tick, reason: event.reason })
    } else if (event.kind === 'error') {
      const error = fromNativeError(event.error)
      if (diagnostics.error.hasSubscribers) {
        diagnostics.error.publish({ key: `${this.name}:${event.tick}`, ms: Date.now() - event.tick, error })
      }
      this.#error(error, tick)
    } else if (event.kind === 'lost') {
      const run = this.#runs.get(event.tick)
      if (run !== undefined) publishLost(run)
      run?.controller.abort(new LockLostError(run.key))
    } else if (event.kind === 'run') {
      const run = this.#runs.get(event.tick)
      this.#runs.delete(event.tick)
      if (run !== undefined) publishEnd(run, event.lost)
      if (run === undefined) {
        this.#error(new ClosedError(`the task of '${this.name}' could not be called: the JS environment is closing`), tick)
      } else if (event.lost) {
        const err = run.controller.signal.reason ?? new LockLostError(run.key)
        run.controller.abort(err)
        if (run.threw && run.error !== err) err.cause = run.error
        err.value = run.value
        this.#error(err, tick)
      } else if (run.threw) {
        this.#error(run.error, tick)
      } else {
        this.emit('run', { tick, fence: event.fence, durationMs: event.durationMs })
      }
    }
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
