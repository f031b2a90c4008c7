'use strict'
// The context of the run a decorated method executes in (`currentRun()`): kept in an AsyncLocalStorage by the
// wrappers of @Cron, @WithLock and @Snatch methods, so that it reaches the method and whatever it awaits without
// changing the method's parameters.

const { AsyncLocalStorage } = require('node:async_hooks')
const { SnatchError } = require('../errors')

const runs = new AsyncLocalStorage()

/** Calls `fn()` with `ctx` as the current run's context. */
function withRun(ctx, fn) {
  return runs.run(ctx, fn)
}

/**
 * The context (`signal`, `fence`, `key`, `validUntil`; a schedule's also `tick`, `attempt`, `why`) of the run of a
 * @Cron, @WithLock or @Snatch method this code executes in. Throws ERR_SNATCH_NO_RUN outside one.
 */
function currentRun() {
  const ctx = runs.getStore()
  if (ctx === undefined) {
    throw new SnatchError('currentRun() was called outside a run of a @Cron, @WithLock or @Snatch method', 'ERR_SNATCH_NO_RUN')
  }
  return ctx
}

module.exports = { withRun, currentRun }
