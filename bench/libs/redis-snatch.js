'use strict'
// redis-snatch, the package under test (the built module in the package root), or another build of it for an
// interleaved before/after comparison (the `snatch-base` entry: the package at SNATCH_BASE).

const path = require('node:path')

/**
 * One Locker on `url`, or on `deployment` when given (createLocker's connection options: `{ cluster }` or
 * `{ url, tls }`), from the package root, or with `base` from the package at SNATCH_BASE; tryLock/release,
 * snatchTask, lock with `wait`. With `otel`, OpenTelemetry is on (see `instrumented`).
 */
function create({ url, deployment, prefix, ttl, base = false, otel = false }) {
  if (base && !process.env.SNATCH_BASE) throw new Error('snatch-base needs SNATCH_BASE: the directory of another build')
  const root = base ? path.resolve(process.env.SNATCH_BASE) : path.join(__dirname, '..', '..')
  const { createLocker } = require(root)
  const off = otel ? instrumented(root) : () => {}
  const locker = createLocker({ ...(deployment || { url }), prefix, ttl })
  return {
    tryAcquire: (key) => locker.tryLock(key),
    release: (lock) => lock.release(),
    withFn: async (key, fn) => (await locker.snatchTask(key, fn)).ran,
    acquireWait: (key, wait) => locker.lock(key, { wait }),
    close: async () => {
      await locker.close()
      off()
    },
  }
}

/**
 * Turns redis-snatch/otel on as a service would with the SDK (from the package's dev dependencies): spans batched to
 * an exporter that drops them, metrics aggregated for a reader that is never asked, the async-hooks context manager.
 * Returns what turns it off.
 */
function instrumented(root) {
  const from = (name) => require(require.resolve(name, { paths: [root] }))
  const api = from('@opentelemetry/api')
  const { AsyncLocalStorageContextManager } = from('@opentelemetry/context-async-hooks')
  const { BasicTracerProvider, BatchSpanProcessor } = from('@opentelemetry/sdk-trace-base')
  const { MeterProvider, MetricReader } = from('@opentelemetry/sdk-metrics')
  const dropped = { export: (_spans, done) => done({ code: 0 }), shutdown: async () => {} }
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(dropped)] })
  class Unread extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  const meterProvider = new MeterProvider({ readers: [new Unread()] })
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  const instrumentation = from(path.join(root, 'otel')).instrument({ tracerProvider, meterProvider })
  return () => instrumentation.disable()
}

module.exports = { create }
