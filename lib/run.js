'use strict'

const { OutcomeKind } = require('./native')
const { RunFrames } = require('./context')
const diagnostics = require('./diagnostics')
const { ClosedError, LockLostError, RunReplacedError, RunTimeoutError, atCaller, untracedError } = require('./errors')

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

/** The frames of runs not made by a locker's methods (a leader's terms): nobody looks for them. */
const UNSEEN = new RunFrames()

/**
 * What a run's fn receives: the key, the fence of its lease, and a signal that aborts if the lease is lost; a set's
 * run also `keys` and `fences` (`key` and `fence` are its first key's).
 */
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
 * The JS side of one run of the native lifecycle (snatchTask, withLock, withPermit, withRead, withWrite, withLocks,
 * shared, a leader's term): calls fn when the native side has the lease, reports back when it settled (`finish`), and
 * turns the native outcome into the method's result. Loss, its reason and the run's end are the native side's: this
 * aborts the signal and delivers them. One object per run, with its context.
 */
class Run {
  #key
  #fn
  #finish
  #remainingMs
  #frames
  #ctx
  /** The run's id once its fn is called. */
  #id
  /** The function that awaits fn (named after the run only when a call looks for it: `nameFrame`). */
  #frame
  /** Whether `#frame` is named already. */
  #named = false
  /** A set's keys (undefined for one key). */
  #keys
  /** Made on first read of ctx.signal, or on loss: most fns never look at it. */
  #controller = null
  #threw = false
  #value
  #error
  /** When fn was called, for diagnostics (0 when no one listened then). */
  #acquiredAt = 0
  #lostPublished = false

  /**
   * `finish(id, run)` tells the native side that the fn of run `id` has settled (`run.did()` says how); `remainingMs(id)`
   * how long its lease is still guaranteed; `method` the method of `locker` that made it (for diagnostics; `begun`,
   * when given, is its start as published already); `context`, what fn's context has besides (a set's `keys`);
   * `frames`, the locker's (lib/context.js), where calls inside fn find this run.
   */
  constructor(key, fn, finish, remainingMs, locker, method, begun, context, frames = UNSEEN) {
    /** When the run was started, for diagnostics (0 when no one listened then). */
    this.started = diagnostics.now()
    /** Its start as diagnostics published it (undefined when no one listened then). */
    this.begun = begun ?? diagnostics.begin(locker, key, method)
    this.#key = key
    this.#fn = fn
    this.#finish = finish
    this.#remainingMs = remainingMs
    this.#frames = frames
    /** Started while a fn of its locker was under way: fn's frame is then linked to its caller (lib/locker.js). */
    this.linked = false
    this.#ctx = new TaskContext(this, key)
    if (context !== undefined) Object.assign(this.#ctx, context)
    this.#keys = context?.keys
    /** Its key. */
    this.key = key
  }

  /** The AbortController of ctx.signal. */
  controller() {
    return (this.#controller ??= new AbortController())
  }

  /** Epoch ms until which the lease is guaranteed: ctx.validUntil. */
  validUntil() {
    return Date.now() + (this.#id === undefined ? 0 : this.#remainingMs(this.#id))
  }

  /** fn is to stop (`reason`: the locker closes and its time ran out, or a leader resigns or stops): abort its signal. */
  aborted(reason) {
    this.controller().abort(
      reason === 'shutdown' || reason === undefined
        ? new ClosedError(`the locker closed before the task under '${this.#key}' finished`)
        : new Error(`leadership of '${this.#key}' ${reason}`),
    )
  }

  /** The lease was lost while fn runs (`reason` 'stalled': see maxStall): abort ctx.signal. */
  lost(reason) {
    this.#publishLost(reason)
    this.controller().abort(this.#lostError(reason))
  }

  /**
   * Calls fn under the lease with `fence` (and `more`: a set's `{ keys, fences }`, a term's `{ term }`; `direct`: its lock
   * was taken by a direct call, for diagnostics), awaited in a frame named after the run (lib/context.js), then reports
   * back with `finish`.
   */
  task(id, fence, more, direct = false) {
    this.#id = id
    this.#ctx.fence = fence
    if (more !== undefined) Object.assign(this.#ctx, more)
    this.#acquiredAt = diagnostics.now()
    if (diagnostics.acquire.hasSubscribers) {
      const ms = diagnostics.since(this.started)
      diagnostics.acquire.publish({ key: this.#key, fence, ms, direct, start: this.begun })
    }
    const run = this
    const frame = async () => {
      // A linked run's fn is called once its caller awaits this frame (lib/locker.js, `invoke`).
      if (run.linked) await undefined
      try {
        run.#value = await run.#call()
      } catch (err) {
        run.#threw = true
        run.#error = err
      }
      run.#counted(false)
      run.#finish(id, run)
    }
    this.#frame = frame
    this.#counted(true)
    return frame()
  }

  /** Its key (a set's keys) counted in its frames' `held` while fn is under way (`began`), or no longer. */
  #counted(began) {
    const frames = this.#frames
    const keys = this.#keys
    if (keys === undefined) {
      if (began) frames.began(this.key)
      else frames.ended(this.key)
    } else {
      for (const key of keys) {
        if (began) frames.began(key)
        else frames.ended(key)
      }
    }
  }

  /** Names fn's frame after the run (`prefix` and its id), once, where `within()` of lib/context.js finds it. */
  nameFrame(prefix) {
    if (this.#frame === undefined || this.#named) return
    Object.defineProperty(this.#frame, 'name', { value: prefix + this.#id })
    this.#named = true
  }

  /** fn called with its context: what it returns. */
  #call() {
    return this.begun === undefined ? this.#fn(this.#ctx) : diagnostics.wrapped(this.begun, () => this.#fn(this.#ctx))
  }

  /** What fn did: `{ threw, error, value }`. */
  did() {
    return { threw: this.#threw, error: this.#error, value: this.#value }
  }

  /** fn's outcome is `err` after all (its value could not be kept, say). */
  fail(err) {
    this.#threw = true
    this.#error = err
    this.#value = undefined
  }

  /** What fn failed with, as a record keeps it (its message); undefined when it did not fail. */
  failure() {
    if (!this.#threw) return undefined
    const err = this.#error
    return String(err instanceof Error ? err.message : err)
  }

  /**
   * The run's result from its end (`kind`, `fence`, and whether the lease lapsed as `extra`): undefined when not
   * acquired, `{ ran, value, fence }` when fn ran; throws fn's error, or LockLostError (with `cause` and `value`) when
   * the lease lapsed meanwhile.
   */
  outcome({ kind, fence, extra: lost }) {
    if (kind === NOT_ACQUIRED) diagnostics.publishBusy(this.#key, this.started, this.begun)
    if (kind !== RAN) return undefined
    this.ended(lost)
    const failed = endError(lost ? 'lost' : this.#threw ? 'failed' : 'ok', this.#settledState(), () => new LockLostError(this.#key))
    // Called by the method the caller awaits: a loss made at its delivery gets the caller's stack.
    if (failed !== null) throw atCaller(failed.error)
    return { ran: true, value: this.#value, fence }
  }

  /** The run ended (`lost`: its lease lapsed meanwhile): its loss, if not yet, and its end are published. */
  ended(lost) {
    if (!(diagnostics.release.hasSubscribers || diagnostics.lost.hasSubscribers)) return
    if (lost) this.#publishLost()
    diagnostics.publishRelease(this.#key, this.#ctx.fence, this.#acquiredAt, !lost, this.begun)
  }

  /** What fn did, for `endError`. */
  #settledState() {
    const abort = (err) => this.controller().abort(err)
    return { signal: this.#controller?.signal, abort, threw: this.#threw, error: this.#error, value: this.#value }
  }

  /** Publishes the loss of the lease (`reason` 'stalled', or undefined), once. */
  #publishLost(reason) {
    if (this.#lostPublished) return
    this.#lostPublished = diagnostics.publishLost(this.#key, this.#ctx.fence, this.#acquiredAt, this.begun, reason)
  }

  /** The reason ctx.signal aborted with, or a new LockLostError (for `reason`). */
  #lostError(reason) {
    return this.#controller?.signal.reason ?? untracedError(new LockLostError(this.#key, { reason }))
  }
}

module.exports = { Run, endError }
