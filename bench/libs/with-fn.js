'use strict'
// The withfn cycle for adapters whose library has no "run under the lock" of its own: one attempt, the function,
// the release in `finally`.

/** An adapter's `withFn(key, fn)` from its `tryAcquire` and `release`: false when the key was taken. */
function withFnOf(tryAcquire, release) {
  return async (key, fn) => {
    const lock = await tryAcquire(key)
    if (!lock) return false
    try {
      await fn()
    } finally {
      await release(lock)
    }
    return true
  }
}

module.exports = { withFnOf }
