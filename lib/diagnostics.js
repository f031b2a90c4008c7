'use strict'
// What redis-snatch publishes on Node's diagnostics_channel, for tracing and metrics without wrapping calls. Each
// publisher checks `hasSubscribers` first: with no subscriber, no message (and no timestamp) is made.

const dc = require('node:diagnostics_channel')
const { performance } = require('node:perf_hooks')

/**
 * `{ key, method, locker }`: a call of `locker` starts (runs of fn: `withLock`, `snatchTask`, `withPermit`, `withRead`,
 * `withWrite`, `withLocks` under its first key, `shared`, `idempotency`, `lead` for each wait of a campaign and its
 * term; locks: `lock`, `tryLock`, `acquire`, `tryAcquire`, `read`, `write`, `adopt`, `lockAll` one per key of a set;
 * `schedule` for a schedule's attempt run here, with `schedule`, `tick`, `attempt`, `why`, `fence`), published in the
 * caller's own async context. The same object is the `start` of that call's later messages.
 */
const start = dc.channel('redis-snatch:start')
/**
 * `{ key, fence, ms, direct, start }`: a lock was acquired or a task's lease taken; `ms` since the call (schedules: the
 * tick); `direct` whether it was taken by a direct call (the direct connection: docs/how-it-works.md).
 */
const acquire = dc.channel('redis-snatch:acquire')
/** `{ key, ms, start }`: a one-attempt call found the key held (snatchTask's `{ ran: false }`, tryLock's null). */
const busy = dc.channel('redis-snatch:busy')
/** `{ key, fence, ms, released, start }`: a lock or task ended; `ms` it was held; `released` false when no longer ours. */
const release = dc.channel('redis-snatch:release')
/**
 * `{ key, fence, ms, reason?, start }`: a lease was lost while held; `ms` it was held until then; `reason` 'stalled'
 * when it lapsed because the event loop did not turn within `maxStall`.
 */
const lost = dc.channel('redis-snatch:lost')
/** `{ key, fence?, ms, error, start }`: a call failed (RedisError, QuorumError, LockTimeoutError, ClosedError, ...). */
const error = dc.channel('redis-snatch:error')
/**
 * `{ schedule, tick, attempt, why, fence, instance, lagMs, durationMs, ending, error?, start }`: a schedule's attempt
 * run here ended, as its record says (`ending`: ok, failed, timeout, replaced, lost); `lagMs` from its tick (plus
 * its jitter offset) to fn's call.
 */
const attempt = dc.channel('redis-snatch:attempt')
/** `{ schedule, tick, reason, locker }`: this replica recorded an occurrence of a schedule of `locker` missed. */
const missed = dc.channel('redis-snatch:missed')

/**
 * Where a subscriber to `start` may put `(fn) => …`, which then calls the user's fn of that call (say, within a
 * tracing context). Internal: the OpenTelemetry integration's.
 */
const WRAP = Symbol('redis-snatch wrap')

/** Whether anyone listens to any of the call's channels. */
function listened() {
  return (
    start.hasSubscribers || acquire.hasSubscribers || busy.hasSubscribers || release.hasSubscribers ||
    lost.hasSubscribers || error.hasSubscribers
  )
}

/** A timestamp for a later `ms`, or 0 when no one listens (then no message will need it). */
function now() {
  return listened() ? performance.now() : 0
}

/** Milliseconds since `since` (a `now()`); 0 when that was taken while no one listened. */
function since(since) {
  return since === 0 ? 0 : performance.now() - since
}

/**
 * Publishes the start of a call of `locker` `{ key, method, locker, ...more }` if anyone listens: the call's `start`,
 * else undefined.
 */
function begin(locker, key, method, more) {
  if (!start.hasSubscribers) return undefined
  const message = { key, method, locker, ...more }
  start.publish(message)
  return message
}

/** Calls `fn()` as a subscriber to the call's `start` asked (see WRAP), or as it is. */
function wrapped(begun, fn) {
  const wrap = begun?.[WRAP]
  return wrap === undefined ? fn() : wrap(fn)
}

/** Publishes that a one-attempt call found `key` held `{ key, ms, start }`, `ms` since `since` (a `now()`). */
function publishBusy(key, startedAt, begun) {
  if (busy.hasSubscribers) busy.publish({ key, ms: since(startedAt), start: begun })
}

/**
 * Publishes a lease's loss `{ key, fence, ms, reason?, start }`, `ms` since `acquiredAt` (a `now()`); whether anyone
 * listened.
 */
function publishLost(key, fence, acquiredAt, begun, reason) {
  if (!lost.hasSubscribers) return false
  const message = { key, fence, ms: since(acquiredAt), start: begun }
  if (reason !== undefined) message.reason = reason
  lost.publish(message)
  return true
}

/**
 * Publishes a lease's end `{ key, fence, ms, released, start }`, `ms` since `acquiredAt` (a `now()`), if anyone
 * listens.
 */
function publishRelease(key, fence, acquiredAt, released, begun) {
  if (release.hasSubscribers) release.publish({ key, fence, ms: since(acquiredAt), released, start: begun })
}

/** Publishes a failed call `{ key, fence?, ms, error, start }`, `ms` since `startedAt` (a `now()`), if anyone listens. */
function publishError(key, fence, startedAt, err, begun) {
  if (!error.hasSubscribers) return
  const message = { key, ms: since(startedAt), error: err, start: begun }
  if (fence !== undefined) message.fence = fence
  error.publish(message)
}

module.exports = {
  start,
  acquire,
  busy,
  release,
  lost,
  error,
  attempt,
  missed,
  WRAP,
  now,
  since,
  begin,
  wrapped,
  publishBusy,
  publishLost,
  publishRelease,
  publishError,
}
