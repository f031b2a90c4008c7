'use strict'
// What redis-snatch publishes on Node's diagnostics_channel, for tracing and metrics without wrapping calls. Each
// publisher checks `hasSubscribers` first: with no subscriber, no message (and no timestamp) is made.

const dc = require('node:diagnostics_channel')
const { performance } = require('node:perf_hooks')

/**
 * `{ key, fence, ms, direct }`: a lock was acquired or a task's lease taken; `ms` since the call (schedules: the tick);
 * `direct` whether it was taken by a direct call (the direct connection, under the README's How it works).
 */
const acquire = dc.channel('redis-snatch:acquire')
/** `{ key, fence, ms, released }`: a lock or task ended; `ms` it was held; `released` false when no longer ours. */
const release = dc.channel('redis-snatch:release')
/** `{ key, fence, ms }`: a lease was lost while held; `ms` it was held until then. */
const lost = dc.channel('redis-snatch:lost')
/** `{ key, fence?, ms, error }`: a call failed (RedisError, QuorumError, LockTimeoutError, ClosedError, ...). */
const error = dc.channel('redis-snatch:error')

/** A timestamp for a later `ms`, or 0 when no one listens (then no message will need it). */
function now() {
  return acquire.hasSubscribers || release.hasSubscribers || lost.hasSubscribers || error.hasSubscribers
    ? performance.now()
    : 0
}

/** Milliseconds since `since` (a `now()`); 0 when that was taken while no one listened. */
function since(since) {
  return since === 0 ? 0 : performance.now() - since
}

/** Publishes a lease's loss `{ key, fence, ms }`, `ms` since `acquiredAt` (a `now()`); whether anyone listened. */
function publishLost(key, fence, acquiredAt) {
  if (!lost.hasSubscribers) return false
  lost.publish({ key, fence, ms: since(acquiredAt) })
  return true
}

/** Publishes a lease's end `{ key, fence, ms, released }`, `ms` since `acquiredAt` (a `now()`), if anyone listens. */
function publishRelease(key, fence, acquiredAt, released) {
  if (release.hasSubscribers) release.publish({ key, fence, ms: since(acquiredAt), released })
}

/** Publishes a failed call `{ key, fence?, ms, error }`, `ms` since `start` (a `now()`), if anyone listens. */
function publishError(key, fence, start, err) {
  if (!error.hasSubscribers) return
  const message = { key, ms: since(start), error: err }
  if (fence !== undefined) message.fence = fence
  error.publish(message)
}

module.exports = { acquire, release, lost, error, now, since, publishLost, publishRelease, publishError }
