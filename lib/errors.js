'use strict'

/** Base class of every error redis-snatch raises itself; `code` is stable (docs/locks.md, "Errors"). */
class SnatchError extends Error {
  constructor(message, code, options) {
    super(message, options)
    this.name = new.target.name
    Object.defineProperty(this, 'code', { value: code, enumerable: true })
  }
}

/** A Redis server could not be reached or a command failed; `cause` says why. */
class RedisError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_REDIS', options)
  }
}

/** Redlock could not lock a majority of the nodes within the validity window. */
class QuorumError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_QUORUM', options)
  }
}

/** `wait` elapsed without getting the lock (fenced(): the fence row). */
class LockTimeoutError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_TIMEOUT', options)
  }
}

/** LockLostError's messages by reason. */
const REASONS = {
  __proto__: null,
  stalled: (key) =>
    `the lease of lock '${key}' was lost: the event loop was blocked for longer than maxStall, so it was not renewed`,
  handoff: (key) =>
    `the lock '${key}' handed over is not held by its handle any more: it expired, was adopted already, or its token is not the lock's`,
}

/** The lease was lost while the lock was held; `value` is what the task returned, if it returned. */
class LockLostError extends SnatchError {
  /**
   * `options.reason` 'stalled': it lapsed because the event loop did not turn within `maxStall` (not renewed);
   * 'handoff': a handed-over lock that could not be adopted, its key no longer holding the handle's token.
   */
  constructor(key, options) {
    const reason = options?.reason
    super(`${REASONS[reason]?.(key) ?? `the lease of lock '${key}' was lost`}`, 'ERR_SNATCH_LOCK_LOST', options)
    this.value = undefined
    if (reason in REASONS) this.reason = reason
  }
}

/** The locker was closed. */
class ClosedError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_CLOSED', options)
  }
}

/** `trigger()`: no live replica has registered the schedule, so nothing would run it. */
class NoReplicaError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_NO_REPLICA', options)
  }
}

/** A schedule's attempt took longer than its `timeout`: its signal aborts with this, and the attempt failed. */
class RunTimeoutError extends SnatchError {
  constructor(name, ms, options) {
    super(`schedule '${name}' attempt timed out after ${ms} ms`, 'ERR_SNATCH_RUN_TIMEOUT', options)
  }
}

/** A schedule's running attempt gave way to a later occurrence (`concurrency: 'replace'`): its signal aborts with this. */
class RunReplacedError extends SnatchError {
  constructor(name, options) {
    super(`schedule '${name}' attempt was replaced by a later occurrence`, 'ERR_SNATCH_REPLACED', options)
  }
}

/** A shared result's value cannot be stored: it cannot be serialized, or is over `maxResultBytes`. */
class ResultError extends SnatchError {
  constructor(message, options) {
    super(message, 'ERR_SNATCH_RESULT', options)
  }
}

/**
 * A fenced write (redis-snatch/fence) whose fence is below the one already recorded for its resource: a newer holder
 * wrote since. Nothing of it was committed.
 */
class StaleFenceError extends SnatchError {
  /** `fence`: the write's; `current`: the higher one recorded. */
  constructor(resource, fence, current, options) {
    super(
      `fence ${fence} of '${resource}' is stale: fence ${current} is recorded for it already (a newer holder wrote); nothing was committed`,
      'ERR_SNATCH_STALE_FENCE',
      options,
    )
    this.resource = resource
    this.fence = fence
    this.current = current
  }
}

/**
 * A waiting call (withLock, lock, withLocks, lockAll) on a key its calling context holds already (it runs inside the fn of a
 * withLock, snatchTask or withLocks of the same locker on that key): it would wait for itself. `key` names it.
 */
class ReentrantError extends SnatchError {
  constructor(key, message, options) {
    super(message, 'ERR_SNATCH_REENTRANT', options)
    this.key = key
  }
}

const INVALID_ARG = 'ERR_SNATCH_INVALID_ARG'

/** A TypeError or RangeError (`Class`) with code ERR_SNATCH_INVALID_ARG. */
function invalidArg(Class, message) {
  const err = new Class(message)
  err.code = INVALID_ARG
  return err
}

/** The exported class for each name of the binding's `ErrorClass`. */
const CLASSES = { TypeError, RangeError, RedisError, QuorumError, LockTimeoutError, ClosedError, NoReplicaError, ReentrantError }

/** The errors made where the caller's frames are not on the stack (a native delivery): their stack is taken again at the caller. */
const untraced = new WeakSet()

/**
 * `err`, made where the caller's frames are not on the stack (a native delivery, a loss), marked so that `atCaller`
 * takes its stack again where the caller awaits it.
 */
function untracedError(err) {
  untraced.add(err)
  return err
}

/**
 * Rethrows `err` with its stack taken here, once, when it was made where the caller's frames were not on the stack
 * (`untracedError`): called in the catch of an async function the caller awaits, V8's async stack trace then reaches
 * the caller's frames. Anything else (fn's own errors) is left as it is. Costs nothing unless something is thrown.
 */
function atCaller(err) {
  if (untraced.delete(err)) Error.captureStackTrace(err, atCaller)
  return err
}

/**
 * The exported error a native one describes: `{ class, message, cause?, key? }` (the binding's `NativeError`, in a
 * completion or event), `cause` being what Redis or the connection said; its stack is the caller's once rethrown with
 * `atCaller`.
 * @param {{ class: string, message: string, cause?: string | null, key?: string | null }} error
 */
function fromNativeError({ class: name, message, cause, key }) {
  const Class = CLASSES[name]
  if (Class === TypeError || Class === RangeError) return untracedError(invalidArg(Class, message))
  const options = cause === undefined || cause === null ? undefined : { cause: new Error(cause) }
  return untracedError(Class === ReentrantError ? new ReentrantError(key, message, options) : new Class(message, options))
}

/**
 * Converts an error thrown by the native binding (its `code` is an `ErrorClass` name, its `cause` an Error) into the
 * exported class it names. Anything else is returned unchanged.
 */
function fromNative(err) {
  const name = err?.code
  if (typeof name !== 'string' || !Object.hasOwn(CLASSES, name)) return err
  return fromNativeError({ class: name, message: err.message, cause: err.cause?.message })
}

/** Awaits `promise`, converting a native rejection with `fromNative`. */
async function native(promise) {
  try {
    return await promise
  } catch (err) {
    throw fromNative(err)
  }
}

/**
 * Emits 'error' (`err`, ...`about`) on `emitter`; without a listener, logs `what` and `err` to stderr instead of
 * crashing the process, the first time only (`logged`: whether an earlier one was). Returns whether one is logged.
 */
function emitError(emitter, logged, what, err, ...about) {
  if (emitter.listenerCount('error') > 0) {
    emitter.emit('error', err, ...about)
    return logged
  }
  if (!logged) console.error(`redis-snatch: ${what} (no 'error' listener):`, err)
  return true
}

module.exports = {
  SnatchError,
  RedisError,
  QuorumError,
  LockTimeoutError,
  LockLostError,
  ClosedError,
  NoReplicaError,
  RunTimeoutError,
  RunReplacedError,
  ResultError,
  StaleFenceError,
  ReentrantError,
  invalidArg,
  untracedError,
  atCaller,
  emitError,
  CLASSES,
  fromNative,
  fromNativeError,
  native,
}
