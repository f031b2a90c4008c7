/**
 * `redis-snatch/otel`. OpenTelemetry: spans and metrics of every locker.
 * @module otel
 */
import type { MeterProvider, TracerProvider } from '@opentelemetry/api'
import type { Locker } from '../../index'

/** Options of `instrument`. */
export interface InstrumentOptions {
  /** Where spans go. Default: the global tracer provider (`trace.getTracerProvider()`). */
  tracerProvider?: TracerProvider
  /** Where metrics go. Default: the global meter provider (`metrics.getMeterProvider()`). */
  meterProvider?: MeterProvider
  /**
   * Whether a lock's key is a label of its metrics (`redis_snatch.key`): `true`, or a function of the key giving the
   * label (say, its prefix up to the first `:`). Default `false`: one series per method and outcome, safe with a key
   * per order. Spans always carry the key.
   */
  keyLabel?: boolean | ((key: string) => string)
  /** Only this Locker's calls and schedules. Default: every Locker of the process. */
  locker?: Locker
}

/**
 * Turns OpenTelemetry on for every locker of this process (or only `options.locker`'s): spans of each wait for a lock (`redis-snatch wait`;
 * a one-attempt call's only when it does not get the lock), each time one is held (`redis-snatch hold`: a run of
 * withLock or snatchTask, a leader's term, a lock, a permit; `redis_snatch.wait_ms` the time to acquire it), in the
 * caller's active context, and of each attempt of a schedule run here (`redis-snatch attempt`, a root span); the
 * user's fn runs inside the hold or attempt span, so its own spans are children of it. Metrics
 * `redis_snatch.lock.acquisitions`, `.lock.wait.duration`, `.lock.hold.duration`, `.lock.held`, `.lock.lost`,
 * `redis_snatch.schedule.attempts`, `.schedule.start_lag`, `.schedule.missed`. Works with `@opentelemetry/api` 1.x
 * from 1.3 (the first with metrics); tested with 1.9 and the SDK 2.x. Off (before it, or after `disable()`), nothing
 * is recorded and nothing is paid.
 */
export function instrument(options?: InstrumentOptions): {
  /** Turns it off again: no spans or metrics from now on. */
  disable(): void
}
