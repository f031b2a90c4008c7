import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Locker } from './index'

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
