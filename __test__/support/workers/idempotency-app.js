'use strict'
// A replica of an HTTP API with redis-snatch/idempotency: an Express app and a Fastify app (both on loopback, ports
// reported over IPC), whose POST /charge reports each run of its handler (`{ event: 'run', app }`), waits 300 ms (with
// `hold` in the body: until the test sends `{ finish: true }`) and answers 201 with a body and a header; POST /crash
// kills the process mid-request. The scope is the `x-user` header.
// REDIS_URL, SNATCH_PREFIX and TTL_MS (the locker's lease) from the environment.

const express = require('express')
const Fastify = require('fastify')
const { createLocker } = require('../../..')
const { idempotency, fastifyIdempotency } = require('redis-snatch/idempotency')

const locker = createLocker({ url: process.env.REDIS_URL, prefix: process.env.SNATCH_PREFIX, ttl: Number(process.env.TTL_MS) })
const options = { scope: (req) => req.headers['x-user'] ?? '' }
let finish = () => {}
process.on('message', (message) => message.finish && finish())
const charge = async (app, body) => {
  process.send({ event: 'run', app, pid: process.pid })
  await new Promise((resolve) => (body.hold ? (finish = resolve) : setTimeout(resolve, 300)))
  return { charged: body.amount, by: process.pid, at: Date.now() }
}
const crash = () => process.kill(process.pid, 'SIGKILL')

async function main() {
  const app = express()
  app.use(express.json())
  app.post('/charge', idempotency(locker, options), async (req, res) => {
    res.status(201).set('x-charge-id', String(process.pid)).json(await charge('express', req.body))
  })
  app.post('/crash', idempotency(locker, options), crash)
  const server = await new Promise((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s))
  })

  const fastify = Fastify()
  await fastify.register(fastifyIdempotency, { locker, ...options })
  fastify.post('/charge', async (request, reply) => {
    reply.code(201).header('x-charge-id', String(process.pid))
    return charge('fastify', request.body)
  })
  fastify.post('/crash', crash)
  await fastify.listen({ port: 0, host: '127.0.0.1' })
  process.send({ event: 'ready', express: server.address().port, fastify: fastify.server.address().port })
}

main()
