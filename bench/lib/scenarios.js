'use strict'
// The scenarios: for an adapter, the loop that `measure` runs in each of its concurrent copies. `needs` names an
// adapter method the scenario requires (only the adapters that have it run it); `deployment` names the deployment it
// runs on instead of the single plaintext redis-server (run.js starts it; only adapters marked `deployments` in
// libs/index.js run there).

const { performance } = require('node:perf_hooks')
const { sleep } = require('./measure')

const HANDOFF_WAIT_MS = 30_000
const HANDOFF_HOLD_MS = 5

const KEYS_PER_LOOP = 20

/** The task of `withfn`: an async function that resolves at once. */
const task = async () => {}

/**
 * The withfn cycle on keys spread over many slots: each loop takes its own KEYS_PER_LOOP keys in turn
 * (`w<index>:<n>`), so no two loops share a key and a key is free again long before its loop comes back to it.
 */
const spreadWithFn = (lib) => async (index, run) => {
  for (let n = 0; !run.stopped; n++) {
    const key = `w${index}:${n % KEYS_PER_LOOP}`
    const start = performance.now()
    if (!(await lib.withFn(key, task))) throw new Error(`the loop's own key ${key} was taken`)
    run.record(performance.now() - start)
  }
}

/**
 * The withfn cycle on a new key every time (`n<index>:<n>`, under a prefix of its own per run): the key and its fence
 * counter do not exist yet, as when a job or an order is grabbed by its id.
 */
const newKeysWithFn = (lib) => async (index, run) => {
  for (let n = 0; !run.stopped; n++) {
    const start = performance.now()
    if (!(await lib.withFn(`n${index}:${n}`, task))) throw new Error(`the new key n${index}:${n} was taken`)
    run.record(performance.now() - start)
  }
}

/**
 * The cycle of `method` of the adapter (withPermit, withWrite: a run of an async fn that resolves at once under its own
 * key per loop, `<prefix><index>`; with `newKeys`, a new key every cycle, `<prefix><index>:<n>`).
 */
const runOf = (method, prefix, newKeys = false) => (lib) => async (index, run) => {
  for (let n = 0; !run.stopped; n++) {
    const key = newKeys ? `${prefix}${index}:${n}` : `${prefix}${index}`
    const start = performance.now()
    if (!(await lib[method](key, task))) throw new Error(`the loop's own key ${key} was taken`)
    run.record(performance.now() - start)
  }
}

const SCENARIOS = {
  /** Own key per loop: acquire, release. */
  uncontended: {
    concurrencies: [1, 50],
    loop: (lib) => async (index, run) => {
      const key = `u${index}`
      while (!run.stopped) {
        const start = performance.now()
        const lock = await lib.tryAcquire(key)
        if (!lock) throw new Error(`the loop's own key ${key} was taken`)
        await lib.release(lock)
        run.record(performance.now() - start)
      }
    },
  },
  /** One key for all loops, one attempt per cycle (released when won); successes are counted. */
  contended: {
    concurrencies: [1, 50],
    loop: (lib) => async (index, run) => {
      while (!run.stopped) {
        const start = performance.now()
        const lock = await lib.tryAcquire('c')
        if (lock) await lib.release(lock)
        run.record(performance.now() - start, lock !== null)
      }
    },
  },
  /** Own key per loop: acquire, run an async fn that resolves at once, release, the library's way. */
  withfn: {
    concurrencies: [1, 50],
    loop: (lib) => async (index, run) => {
      const key = `w${index}`
      while (!run.stopped) {
        const start = performance.now()
        if (!(await lib.withFn(key, task))) throw new Error(`the loop's own key ${key} was taken`)
        run.record(performance.now() - start)
      }
    },
  },
  /**
   * Waiters on one key, using the library's wait/retry; a cycle is one handoff, recorded as the time from the
   * holder's release call to the next holder's acquisition. A releaser queues again only once someone else holds
   * the key, and a holder keeps it HANDOFF_HOLD_MS, so at each release the others are all waiting (none is
   * making its first attempt just then), as between replicas.
   */
  handoff: {
    concurrencies: [10],
    needs: 'acquireWait',
    loop: (lib) => {
      let releasedAt = null
      let handedOff = null
      return async (index, run) => {
        for (;;) {
          const lock = await lib.acquireWait('h', HANDOFF_WAIT_MS)
          if (releasedAt !== null) run.record(performance.now() - releasedAt)
          handedOff?.resolve()
          const next = (handedOff = deferred())
          await sleep(HANDOFF_HOLD_MS)
          releasedAt = performance.now()
          await lib.release(lock)
          if (run.stopped) return
          await next.promise
          if (run.stopped) return
        }
      }
    },
  },
  /** withfn's cycle as a permit of a semaphore of 1 (withPermit), own key per loop. */
  withpermit: {
    concurrencies: [50],
    needs: 'withPermit',
    loop: runOf('withPermit', 'p'),
  },
  /** withfn's cycle under the write lock of a read-write lock (withWrite), own key per loop. */
  withwrite: {
    concurrencies: [50],
    needs: 'withWrite',
    loop: runOf('withWrite', 'rw'),
  },
  /** shared(): a run of fn for a result stored for the others, a new key every cycle (a run each time, not a read). */
  shared: {
    concurrencies: [50],
    needs: 'shared',
    loop: runOf('shared', 's', true),
  },
  /** withfn on a new key every cycle. */
  newkeys: {
    concurrencies: [50],
    loop: newKeysWithFn,
  },
  /** withfn on one Valkey 9.1 server (the server's own compare-and-delete in use), own key per loop. */
  valkey: {
    concurrencies: [50],
    deployment: 'valkey',
    loop: (lib) => SCENARIOS.withfn.loop(lib),
  },
  /** withfn on one Redis 8 server (the server's own compare-and-delete, DELEX, in use), own key per loop. */
  redis8: {
    concurrencies: [50],
    deployment: 'redis8',
    loop: (lib) => SCENARIOS.withfn.loop(lib),
  },
  /** withfn on a Redis Cluster of 3 masters with a replica each, each loop cycling through its own keys. */
  cluster: {
    concurrencies: [50],
    deployment: 'cluster',
    loop: spreadWithFn,
  },
  /** newkeys on the Redis Cluster of 3 masters with a replica each. */
  'cluster-newkeys': {
    concurrencies: [50],
    deployment: 'cluster',
    loop: newKeysWithFn,
  },
  /** The cluster scenario on a Valkey 9.1 Cluster (the server's own compare-and-delete in use). */
  'cluster-valkey': {
    concurrencies: [50],
    deployment: 'cluster-valkey',
    loop: spreadWithFn,
  },
  /** The cluster scenario on a Redis 8 Cluster (the server's own compare-and-delete in use). */
  'cluster-redis8': {
    concurrencies: [50],
    deployment: 'cluster-redis8',
    loop: spreadWithFn,
  },
  /** withfn on one redis-server over TLS, each loop cycling through its own keys, as on the cluster. */
  tls: {
    concurrencies: [50],
    deployment: 'tls',
    loop: spreadWithFn,
  },
  /** The tls scenario on a Redis 8 server (the server's own compare-and-delete in use). */
  'tls-redis8': {
    concurrencies: [50],
    deployment: 'tls-redis8',
    loop: spreadWithFn,
  },
}

/** A promise with its resolve function. */
function deferred() {
  let resolve
  const promise = new Promise((r) => {
    resolve = r
  })
  return { promise, resolve }
}

module.exports = { SCENARIOS, KEYS_PER_LOOP }
