'use strict'
// OpenTelemetry's SDK as a service turns it on (from the package's dev dependencies): every span recorded, batched
// to an exporter that drops them (counting them by name), metrics aggregated for a reader that is never asked, the
// async-hooks context manager. The same for every side of a comparison: redis-snatch/otel, and ioredis's own
// instrumentation on raw ioredis.

const root = require('node:path').join(__dirname, '..', '..')

/**
 * The SDK's providers, set up with `root`'s packages (the package under test, or the build at SNATCH_BASE), and the
 * spans seen so far by name (`spans`).
 */
function sdk(from = root) {
  const load = (name) => require(require.resolve(name, { paths: [from, root] }))
  const api = load('@opentelemetry/api')
  const { AsyncLocalStorageContextManager } = load('@opentelemetry/context-async-hooks')
  const { BasicTracerProvider, BatchSpanProcessor } = load('@opentelemetry/sdk-trace-base')
  const { MeterProvider, MetricReader } = load('@opentelemetry/sdk-metrics')
  const spans = {}
  const counting = {
    export: (batch, done) => {
      for (const span of batch) spans[span.name] = (spans[span.name] ?? 0) + 1
      done({ code: 0 })
    },
    shutdown: async () => {},
  }
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(counting)] })
  class Unread extends MetricReader {
    async onForceFlush() {}
    async onShutdown() {}
  }
  const meterProvider = new MeterProvider({ readers: [new Unread()] })
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  api.trace.setGlobalTracerProvider(tracerProvider)
  return { tracerProvider, meterProvider, spans }
}

module.exports = { sdk }
