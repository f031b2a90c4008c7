'use strict'
// redis-snatch, the package under test (the package root; its native module is built in lib/), or another build of
// it for an interleaved before/after comparison (the `snatch-base` entry: the package at SNATCH_BASE).

const fs = require('node:fs')
const path = require('node:path')
const { sdk } = require('./otel-sdk')

/**
 * One Locker on `url`, or on `deployment` when given (createLocker's connection options: `{ cluster }` or
 * `{ url, tls }`), from the package root, or with `base` from the package at SNATCH_BASE; tryLock/release,
 * snatchTask, lock with `wait`; withPermit, withWrite and shared, each as a run of fn. With `otel`, OpenTelemetry is on (see `instrumented`); with `prom`, its prom-client
 * metrics (registerMetrics into a Registry of the package's dev dependency prom-client, never scraped).
 */
function create({ url, deployment, prefix, ttl, base = false, otel = false, prom = false }) {
  if (base && !process.env.SNATCH_BASE) throw new Error('snatch-base needs SNATCH_BASE: the directory of another build')
  const root = base ? path.resolve(process.env.SNATCH_BASE) : path.join(__dirname, '..', '..')
  const { createLocker } = require(root)
  let off = otel ? instrumented(root) : () => {}
  const locker = createLocker({ ...(deployment || { url }), prefix, ttl })
  if (prom) {
    const { Registry } = require(require.resolve('prom-client', { paths: [root] }))
    const entry = ['lib/entries/prometheus.js', 'prometheus.js'].map((file) => path.join(root, file)).find(fs.existsSync)
    off = require(entry).registerMetrics(locker, new Registry()).disable
  }
  return {
    tryAcquire: (key) => locker.tryLock(key),
    release: (lock) => lock.release(),
    withFn: async (key, fn) => (await locker.snatchTask(key, fn)).ran,
    withPermit: async (key, fn) => (await locker.semaphore(key, 1).withPermit(fn), true),
    withWrite: async (key, fn) => (await locker.rwlock(key).withWrite(fn), true),
    shared: async (key, fn) => (await locker.shared(key, fn), true),
    acquireWait: (key, wait) => locker.lock(key, { wait }),
    close: async () => {
      await locker.close()
      off()
    },
  }
}

/** Turns redis-snatch/otel on with the SDK of otel-sdk.js (as a service would); returns what turns it off. */
function instrumented(root) {
  const { tracerProvider, meterProvider } = sdk(root)
  // redis-snatch/otel's entry: lib/entries/otel.js, or otel.js in a build from before that layout (SNATCH_BASE).
  const entry = ['lib/entries/otel.js', 'otel.js'].map((file) => path.join(root, file)).find(fs.existsSync)
  const instrumentation = require(entry).instrument({ tracerProvider, meterProvider })
  return () => instrumentation.disable()
}

module.exports = { create }
