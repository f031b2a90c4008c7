'use strict'

const { OutcomeKind } = require('./native')
const diagnostics = require('./diagnostics')
const { ClosedError, LockLostError, RunReplacedError, RunTimeoutError } = require('./errors')

const RAN = OutcomeKind.Ran
const NOT_ACQUIRED = OutcomeKind.NotAcquired

/** The error class of each ending in which fn's signal aborted or its lease lapsed. */
const ABORTED_WITH = {
  lost: LockLostError,
  timeout: RunTimeoutError,
  replaced: RunReplacedError,
  interrupted: ClosedError,
}

/**
 * What a run that ended `ending` (decided natively: 'ok', 'failed', 'lost', 'timeout', 'replaced', 'interrupted') comes to for
 * its caller, from what its fn did (`settled`: `{ signal, abort(err), threw, error, value }`): null for 'ok', else
 * `{ error }`: fn's own for 'failed' (whatever it threw, `undefined` too); otherwise the error fn's signal aborted with
 * for that reason (or `make()`, when it did not), which the signal then says, with fn's own error as `cause` and its
 * value as `value`.
 */
function endError(ending, { signal, abort, threw, error, value }, make) {
  if (ending === 'ok') return null
  if (ending === 'failed') return { error }
  const err = signal?.reason instanceof ABORTED_WITH[ending] ? signal.reason : make()
  abort(err)
  if (threw && error !== err) err.cause = error
  err.value = value
  return { error: err }
}

/** What a run's task receives: the key, the fence of its lease, and a signal that aborts if the lease is lost. */
class TaskContext {
  #run

  constructor(run, key) {
    this.#run = run
    this.fence = undefined
    this.key = key
  }

  /** Aborts (reason: LockLostError) as soon as the lease can no longer be guaranteed. Made on first read. */
  get signal() {
    return this.#run.controller().signal
  }

  /** Epoch ms until which the lease is guaranteed (now once it is lost), as Lock.validUntil. */
  get validUntil() {
    return this.#run.validUntil()
  }
}

/**
 * The JS side of one run (snatchTask, withLock): calls the task when the native side has the lease, reports back
 * when it settled, and turns the native outcome into the method's result. One object per run, with its context.
 */
class Run {
  #key
  #fn
  #taskDone
  #wentDirect
  #remainingMs
  #ctx
  /** The run's id once its task is called. */
  #id
  /** Made on first read of ctx.signal, or on loss: most tasks never look at it. */
  #controller = null
  #threw = false
  #value
  #error
  /** When the task was called, for diagnostics (0 when no one listened then). */
  #acquiredAt = 0
  #lostPublished = false

  /**
   * `taskDone(id)` tells the native side that the task of run `id` has settled; `wentDirect(id)` whether its lock was
   * taken by a direct call (for diagnostics); `remainingMs(id)` how long its lease is still guaranteed; `method` the
   * method of `locker` that made it (for diagnostics).
   */
  constructor(key, fn, taskDone, wentDirect, remainingMs, locker, method) {
    /** When the run was started, for diagnostics (0 when no one listened then). */
    this.started = diagnostics.now()
    /** Its start as diagnostics published it (undefined when no one listened then). */
    this.begun = diagnostics.begin(locker, key, method)
    this.#key = key
    this.#fn = fn
    this.#taskDone = taskDone
    this.#wentDirect = wentDirect
    this.#remainingMs = remainingMs
    this.#ctx = new TaskContext(this, key)
  }

  /** The AbortController of ctx.signal. */
  controller() {
    return (this.#controller ??= new AbortController())
  }

  /** Epoch ms until which the lease is guaranteed: ctx.validUntil. */
  validUntil() {
    return Date.now() + (this.#id === undefined ? 0 : this.#remainingMs(this.#id))
  }

  /** The locker closes, and the task's time to finish ran out: abort ctx.signal. */
  aborted() {
    this.controller().abort(new ClosedError(`the locker closed before the task under '${this.#key}' finished`))
  }

  /** The lease was lost while the task runs (`reason` 'stalled': see maxStall): abort ctx.signal. */
  lost(reason) {
    this.#publishLost(reason)
    this.controller().abort(this.#lostError(reason))
  }

  /** Calls the task under the lease with `fence`, then reports back with `taskDone(id)`. */
  async task(id, fence) {
    this.#id = id
    this.#ctx.fence = fence
    this.#acquiredAt = diagnostics.now()
    if (diagnostics.acquire.hasSubscribers) {
      const direct = this.#wentDirect(id)
      const ms = diagnostics.since(this.started)
      diagnostics.acquire.publish({ key: this.#key, fence, ms, direct, start: this.begun })
    }
    try {
      this.#value = await (this.begun === undefined ? this.#fn(this.#ctx) : diagnostics.wrapped(this.begun, () => this.#fn(this.#ctx)))
    } catch (err) {
      this.#threw = true
      this.#error = err
    }
    this.#taskDone(id)
  }

  /**
   * The run's result from its end (`kind`, `fence`, and whether the lease lapsed as `extra`): undefined when not
   * acquired, `{ ran, value, fence }` when the task ran; throws the task's error, or LockLostError (with `cause` and
   * `value`) when the lease lapsed meanwhile.
   */
  outcome({ kind, fence, extra: lost }) {
    if (kind === NOT_ACQUIRED) diagnostics.publishBusy(this.#key, this.started, this.begun)
    if (kind !== RAN) return undefined
    if (diagnostics.release.hasSubscribers || diagnostics.lost.hasSubscribers) this.#publishEnd(lost)
    const settled = {
      signal: this.#controller?.signal,
      abort: (err) => this.controller().abort(err),
      threw: this.#threw,
      error: this.#error,
      value: this.#value,
    }
    const failed = endError(lost ? 'lost' : this.#threw ? 'failed' : 'ok', settled, () => new LockLostError(this.#key))
    if (failed !== null) throw failed.error
    return { ran: true, value: this.#value, fence }
  }

  /** Publishes the loss of the lease (`reason` 'stalled', or undefined), once. */
  #publishLost(reason) {
    if (this.#lostPublished) return
    this.#lostPublished = diagnostics.publishLost(this.#key, this.#ctx.fence, this.#acquiredAt, this.begun, reason)
  }

  /** Publishes the run's end: its loss first if `lost` and not published yet, then the release. */
  #publishEnd(lost) {
    if (lost) this.#publishLost()
    diagnostics.publishRelease(this.#key, this.#ctx.fence, this.#acquiredAt, !lost, this.begun)
  }

  /** The reason ctx.signal aborted with, or a new LockLostError (for `reason`). */
  #lostError(reason) {
    return this.#controller?.signal.reason ?? new LockLostError(this.#key, { reason })
  }
}

module.exports = { Run, endError }
