/**
 * `redis-snatch/dashboard`. The dashboard: the fleet's schedules and locks as a request handler.
 * @module dashboard
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Locker } from '../../index'

/** Options of `createDashboard`. */
export interface DashboardOptions {
  /**
   * Allow trigger, suspend, resume and force release from the page (POST, with the page's CSRF token). Default false:
   * the page is read-only and those endpoints answer 403.
   */
  actions?: boolean
}

/**
 * The dashboard of `locker`'s deployment (schedules, their runs, the locks held, the connection) as a request handler:
 * a `node:http` listener, or a middleware mounted under a path (Express `app.use('/snatch', handler)`, Koa, Fastify
 * through its raw request and response). Unknown paths go to `next` when given, else 404.
 */
export function createDashboard(
  locker: Locker,
  options?: DashboardOptions,
): (req: IncomingMessage, res: ServerResponse, next?: (err?: unknown) => void) => void
