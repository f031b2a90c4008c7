/**
 * `redis-snatch/prometheus`. Prometheus: the fleet's metrics as a request handler.
 * @module prometheus
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Locker } from '../../index'

/** Options of `createMetricsHandler`. */
export interface MetricsHandlerOptions {
  /**
   * How many schedules, locks and semaphores a scrape lists, each at most (default 1000, up to 100000);
   * `redis_snatch_scrape_truncated{kind}` is 1 when one list was cut.
   */
  limit?: number
}

/**
 * The Prometheus metrics of `locker`'s deployment, read from Redis on each scrape (so any process tells every
 * replica's schedules): per schedule its health, last success, last outcome, running attempts, recent failed and
 * missed counts, suspension, live replicas and next tick; the locks held and the semaphores' permits. A request
 * handler answering GET and HEAD in the text exposition format: a `node:http` listener, or an Express/Connect route
 * (`app.get('/metrics', handler)`). A Redis error answers `redis_snatch_up 0`.
 */
export function createMetricsHandler(
  locker: Locker,
  options?: MetricsHandlerOptions,
): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void

/**
 * What `registerMetrics` needs of a prom-client `Registry` (`new Registry()`, or prom-client's default `register`).
 * prom-client's own type is not named here, so that these declarations need no prom-client where it is not installed.
 */
export interface PromClientRegistry {
  /** prom-client's `Registry.registerMetric`. */
  registerMetric(metric: any): void
  /** prom-client's `Registry.getSingleMetric`. */
  getSingleMetric(name: string): any
}

/** Options of `registerMetrics`. */
export interface RegisterMetricsOptions {
  /**
   * Also the fleet-wide gauges of `createMetricsHandler` (`redis_snatch_up`, `redis_snatch_schedule_health`, the locks
   * held, ...), read from Redis on each collection (default false). For one exporter of the fleet: every replica
   * exporting them would multiply them.
   */
  fleet?: boolean
  /**
   * The value of the `redis_snatch_locker` label of this locker's series, which tells the lockers of one registry
   * apart (default 'default'; a name another locker has in the registry is refused).
   */
  name?: string
  /**
   * The keys this locker's waiting calls waited for most (`locker.contention()`) as gauges with a `redis_snatch_key`
   * label: `redis_snatch_lock_contention_waits`, `_wait_seconds`, `_timeouts` (`true`: the key itself, or a function of
   * the key giving the label; default false: none). At most 100 keys per locker (the core's table, `contention()`),
   * whatever the number of keys; their counts start again when a key leaves the table, so they are gauges.
   */
  keyLabel?: boolean | ((key: string) => string)
}

/**
 * Puts this process's metrics of `locker` into the application's prom-client `registry`, so that its own `/metrics`
 * shows them: acquisitions by outcome (`redis_snatch_lock_acquisitions_total`), waits and holds (histograms
 * `redis_snatch_lock_wait_duration_seconds`, `redis_snatch_lock_hold_duration_seconds`), locks held now
 * (`redis_snatch_lock_held`), leases lost (`redis_snatch_lock_lost_total`), scheduled attempts run here by ending
 * (`redis_snatch_schedule_attempts_total`), start lags and missed occurrences; named as redis-snatch/otel's metrics
 * through OpenTelemetry's Prometheus exporter. No key label, but the contention gauges with `keyLabel`. With `fleet:
 * true`, also the fleet's gauges. The metrics
 * are made with the prom-client the registry belongs to (the application's); prom-client is an optional peer
 * dependency (^15).
 */
export function registerMetrics(
  locker: Locker,
  registry: PromClientRegistry,
  options?: RegisterMetricsOptions,
): {
  /** Stops counting this locker's calls (its series keep their values), takes its fleet gauges away and frees its name. */
  disable(): void
}
