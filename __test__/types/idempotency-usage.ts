// Type test of redis-snatch/idempotency with Express's and Fastify's own types.
import express from 'express'
import Fastify from 'fastify'
import { createLocker } from 'redis-snatch'
import { fastifyIdempotency, idempotency, type IdempotencyOptions } from 'redis-snatch/idempotency'

export async function usage(): Promise<void> {
  const locker = createLocker({ url: 'redis://127.0.0.1:6379' })
  const options: IdempotencyOptions = {
    header: 'Idempotency-Key',
    required: true,
    ttl: 86_400_000,
    scope: (req) => String(req.headers['x-user'] ?? ''),
    fingerprint: async (req) => `${req.method} ${req.url}`,
    maxBytes: 1 << 20,
  }
  const app = express()
  app.use(express.json())
  app.post('/orders', idempotency(locker, options), (req, res) => {
    res.status(201).json({ id: 1 })
  })
  // @ts-expect-error a Locker first
  idempotency(options)

  const fastify = Fastify()
  await fastify.register(fastifyIdempotency, { locker, ...options })
  // @ts-expect-error the plugin needs the locker
  await fastify.register(fastifyIdempotency, options)
}
