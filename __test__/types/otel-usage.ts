// Type test of redis-snatch/otel with @opentelemetry/api's own types and the SDK's providers.
import { metrics, trace } from '@opentelemetry/api'
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base'
import { MeterProvider } from '@opentelemetry/sdk-metrics'
import { createLocker } from 'redis-snatch'
import { instrument, type InstrumentOptions } from 'redis-snatch/otel'

export function usage(): void {
  const options: InstrumentOptions = { tracerProvider: new BasicTracerProvider(), meterProvider: new MeterProvider() }
  instrument(options).disable()
  instrument({ tracerProvider: trace.getTracerProvider(), meterProvider: metrics.getMeterProvider() }).disable()
  instrument({ keyLabel: (key) => key.split(':')[0] ?? key }).disable()
  instrument().disable()
  instrument({ locker: createLocker({ url: 'redis://127.0.0.1:6379' }) }).disable()
  // @ts-expect-error a Locker, not its options
  instrument({ locker: { url: 'redis://127.0.0.1:6379' } })
  // @ts-expect-error keyLabel gives a string
  instrument({ keyLabel: (key: string) => key.length })
  // @ts-expect-error a tracer provider, not a tracer
  instrument({ tracerProvider: trace.getTracer('x') })
}
