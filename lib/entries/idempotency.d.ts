/**
 * `redis-snatch/idempotency`. HTTP idempotency keys: Express middleware and Fastify plugin.
 * @module idempotency
 */
import type { Locker } from '../../index'

/** Options of the idempotency middleware and plugin; `req` is the framework's request. */
export interface IdempotencyOptions {
  /** The request header that carries the key (default 'Idempotency-Key'). */
  header?: string
  /** A request without the header gets 400 (default false: it runs as usual). */
  required?: boolean
  /** How long a response is kept for replay, ms (default 24 h). */
  ttl?: number
  /** Whose keys these are (say, the authenticated user): the same key in two scopes is two keys. Default: one scope. */
  scope?: (req: any) => string | Promise<string>
  /** What makes two requests the same (default: a hash of method, URL and body): another one under a key gets 422. */
  fingerprint?: (req: any) => string | Promise<string>
  /** The largest response body stored, bytes (default 1 MiB); a larger one is not stored, and a retry runs again. */
  maxBytes?: number
}

/**
 * What a handler that runs for a key finds on its request as `req.idempotency` (Express) / `request.idempotency`
 * (Fastify): the key's lock, renewed while it runs.
 */
export interface IdempotencyRun {
  /** Aborts when the lock is lost: stop, another request with the key may run. */
  readonly signal: AbortSignal
  /** The lock's fence: pass it to writes that must not be overtaken by an older run's. */
  readonly fence: bigint
  /** Date.now()-based end of the lock's guarantee. */
  readonly validUntil: number
}

/**
 * Express middleware (any `(req, res, next)` framework on node:http): see the guide "Locks and snatchTask", "HTTP
 * idempotency keys". A replayed response (the stored one, for a later request with the same key) carries the header
 * `Idempotent-Replayed: true`; the first answer and the 409/422 ones do not.
 */
export declare function idempotency(
  locker: Locker,
  options?: IdempotencyOptions,
): (req: any, res: import('node:http').ServerResponse, next: (err?: unknown) => void) => void

/**
 * Fastify plugin: `await fastify.register(fastifyIdempotency, { locker, ...options })`. A replayed response carries
 * `Idempotent-Replayed: true`, as with `idempotency`.
 */
export declare function fastifyIdempotency(fastify: any, options: IdempotencyOptions & { locker: Locker }): Promise<void>
