'use strict'
// The adapter shared by the two Redlock implementations with the same API (redlock 5 and its maintained fork):
// one ioredis client, retryCount 0 for single attempts, `using` for the run-under-lock pattern.

const Redis = require('ioredis')

/** An adapter over `new Redlock([client], { retryCount: 0 })`, for the library's Redlock and error classes. */
function redlockAdapter({ Redlock, ExecutionError, ResourceLockedError }) {
  return function create({ url, prefix, ttl }) {
    const redlock = new Redlock([new Redis(url)], { retryCount: 0 })
    // Redlock emits 'error' for every refused vote, including "resource locked"; without a listener that throws.
    redlock.on('error', () => {})
    const tryAcquire = async (key) => {
      try {
        return await redlock.acquire([prefix + key], ttl)
      } catch (err) {
        if (err instanceof ExecutionError && (await onlyLocked(err))) return null
        throw err
      }
    }
    return {
      tryAcquire,
      release: (lock) => lock.release(),
      async withFn(key, fn) {
        // `using` rejects when the key is taken; an own key per loop is never taken, so any rejection is an error.
        await redlock.using([prefix + key], ttl, () => fn())
        return true
      },
      acquireWait: (key, wait) =>
        redlock.acquire([prefix + key], ttl, { retryCount: Math.ceil(wait / redlock.settings.retryDelay) }),
      close: () => redlock.quit(),
    }
  }

  /** True when every refusal in the attempts of `err` was "resource locked" (not a Redis failure). */
  async function onlyLocked(err) {
    const stats = await Promise.all(err.attempts)
    return stats.every((s) => [...s.votesAgainst.values()].every((e) => e instanceof ResourceLockedError))
  }
}

module.exports = { redlockAdapter }
