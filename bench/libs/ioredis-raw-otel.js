'use strict'
// Raw ioredis (the floor, ioredis-raw.js) with OpenTelemetry on as ioredis users have it: the SDK of otel-sdk.js and
// @opentelemetry/instrumentation-ioredis (a span per command, with or without a parent span), registered before ioredis
// is loaded.

const { sdk } = require('./otel-sdk')

/** The floor's adapter with every ioredis command traced. */
async function create(options) {
  const { tracerProvider, meterProvider } = sdk()
  const { registerInstrumentations } = require('@opentelemetry/instrumentation')
  const { IORedisInstrumentation } = require('@opentelemetry/instrumentation-ioredis')
  // Every command traced, as redis-snatch/otel traces every run: no parent span is needed (its default would trace
  // only commands inside a span, as in a traced HTTP request).
  const instrumentation = new IORedisInstrumentation({ requireParentSpan: false })
  const off = registerInstrumentations({ instrumentations: [instrumentation], tracerProvider, meterProvider })
  const floor = await require('./ioredis-raw').create(options)
  return {
    ...floor,
    close: async () => {
      await floor.close()
      off()
    },
  }
}

module.exports = { create }
