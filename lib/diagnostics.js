'use strict'
// What redis-snatch publishes on Node's diagnostics_channel, for tracing and metrics without wrapping calls. Each
// publisher checks `hasSubscribers` first: with no subscriber, no message (and no timestamp) is made.

const dc = require('node:diagnostics_channel')
const { performance } = require('node:perf_hooks')

/** `{ key, fence, ms }`: a lock was acquired or a task's lease taken; `ms` since the call (schedules: the tick). */
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

module.exports = { acquire, release, lost, error, now, since }
