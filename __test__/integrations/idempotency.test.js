'use strict'
// redis-snatch/idempotency in two processes, each with an Express and a Fastify app on one Redis: concurrent
// duplicates run the handler once (one 201, the others 409), a replay is byte-equal and says it is one
// (`Idempotent-Replayed: true`), another body under the key is 422, two users' keys do not collide, a missing key
// where required is 400, and a handler that crashes its process leaves the key to a retry once its lease has run out.

const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const express = require('express')
const { createLocker } = require('../..')
const { idempotency } = require('redis-snatch/idempotency')
const { uniqueKey, until } = require('../support/util')

jest.setTimeout(30_000)

const TTL_MS = 1000
const prefix = `${uniqueKey('idem')}:`
const replicas = []
let runs = []

beforeAll(async () => {
  for (let i = 0; i < 2; i++) {
    const child = fork(path.join(__dirname, '..', 'support', 'workers', 'idempotency-app.js'), {
      env: { ...process.env, SNATCH_PREFIX: prefix, TTL_MS: String(TTL_MS) },
    })
    child.on('message', (m) => m.event === 'run' && runs.push(m))
    const [ready] = await once(child, 'message')
    replicas.push({ child, express: ready.express, fastify: ready.fastify })
  }
})
afterAll(() => replicas.forEach(({ child }) => child.kill('SIGKILL')))
beforeEach(() => {
  runs = []
})

/** POST `body` to `path` of replica `r`'s `app` with key `key` (none when undefined) as `user`. */
async function post(r, app, route, body, key, user = 'alice') {
  const headers = { 'content-type': 'application/json', 'x-user': user, ...(key !== undefined && { 'idempotency-key': key }) }
  const res = await fetch(`http://127.0.0.1:${r[app]}${route}`, { method: 'POST', headers, body: JSON.stringify(body) })
  const replayed = res.headers.get('idempotent-replayed')
  return { status: res.status, type: res.headers.get('content-type'), id: res.headers.get('x-charge-id'), replayed, body: Buffer.from(await res.arrayBuffer()) }
}

describe.each(['express', 'fastify'])('%s', (app) => {
  test('concurrent duplicates over two processes: one run, one 201, the others 409; a replay is byte-equal, marked Idempotent-Replayed', async () => {
    const key = uniqueKey('order')
    const body = { amount: 42, hold: true } // the handler runs until told to finish
    const answered = []
    const posts = Array.from({ length: 8 }, (_, i) => post(replicas[i % 2], app, '/charge', body, key))
    for (const posted of posts) posted.then((answer) => answered.push(answer))
    // The 7 duplicates are answered while the one run goes on.
    await until(() => runs.length >= 1 && answered.length >= 7, 'a run, and 7 answers beside it')
    replicas.find((r) => r.child.pid === runs[0].pid).child.send({ finish: true })
    const answers = await Promise.all(posts)
    expect(runs).toHaveLength(1)
    const done = answers.filter((a) => a.status === 201)
    expect(done).toHaveLength(1)
    expect(answers.filter((a) => a.status === 409)).toHaveLength(7)
    expect(answers.map((a) => a.replayed)).toEqual(Array(8).fill(null)) // the run's answer and the 409s are no replays
    for (const r of replicas) {
      const replay = await post(r, app, '/charge', body, key)
      expect(replay.status).toBe(201)
      expect(replay.body.equals(done[0].body)).toBe(true)
      expect([replay.type, replay.id, replay.replayed]).toEqual([done[0].type, done[0].id, 'true'])
    }
    expect(runs).toHaveLength(1)
  })

  test('another body under the key is 422; the same key of another user is another key', async () => {
    const key = uniqueKey('order')
    expect((await post(replicas[0], app, '/charge', { amount: 1 }, key)).status).toBe(201)
    const other = await post(replicas[1], app, '/charge', { amount: 2 }, key)
    expect([other.status, other.replayed]).toEqual([422, null])
    expect(JSON.parse(other.body)).toMatchObject({ status: 422 })
    expect((await post(replicas[1], app, '/charge', { amount: 2 }, key, 'bob')).status).toBe(201)
    expect(runs).toHaveLength(2)
    expect((await post(replicas[0], app, '/charge', { amount: 3 })).status).toBe(201) // no key: runs as usual
  })

  test('a handler that crashes its process leaves the key to a retry once its lease has run out', async () => {
    const key = uniqueKey('crash')
    const victim = replicas.shift()
    const exited = once(victim.child, 'exit')
    await expect(post(victim, app, '/crash', {}, key)).rejects.toThrow()
    await exited
    const survivor = replicas[0]
    let status = (await post(survivor, app, '/charge', {}, key)).status
    // 409 while the dead handler's lease lasts (at most TTL_MS), then the retry runs.
    const started = Date.now()
    while (status === 409) {
      await new Promise((resolve) => setTimeout(resolve, 100))
      status = (await post(survivor, app, '/charge', {}, key)).status
    }
    expect(status).toBe(201)
    expect(Date.now() - started).toBeLessThan(TTL_MS + 1000)
    // A replica in the dead one's place, for the other app's run.
    const child = fork(path.join(__dirname, '..', 'support', 'workers', 'idempotency-app.js'), {
      env: { ...process.env, SNATCH_PREFIX: prefix, TTL_MS: String(TTL_MS) },
    })
    child.on('message', (m) => m.event === 'run' && runs.push(m))
    const [ready] = await once(child, 'message')
    replicas.push({ child, express: ready.express, fastify: ready.fastify })
  })
})

test('required: a request without the key is 400; bad options are refused', async () => {
  const locker = createLocker({ url: process.env.REDIS_URL, prefix })
  const app = express()
  app.post('/pay', idempotency(locker, { required: true }), (req, res) => res.send('paid'))
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const res = await fetch(`http://127.0.0.1:${server.address().port}/pay`, { method: 'POST' })
  expect(res.status).toBe(400)
  expect(res.headers.get('content-type')).toBe('application/problem+json')
  server.close()
  expect(() => idempotency(locker, { ttl: 0 })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  expect(() => idempotency({}, {})).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  expect(() => idempotency(locker, { hedaer: 'x' })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  await locker.close()
})

test('5xx responses are not stored (a retry runs again); a response over maxBytes is not stored; a streamed one is, whole', async () => {
  const locker = createLocker({ url: process.env.REDIS_URL, prefix })
  let runs = 0
  const app = express()
  const guard = idempotency(locker, { maxBytes: 1000 })
  app.post('/flaky', guard, (req, res) => {
    expect(typeof req.idempotency.fence).toBe('bigint')
    expect([req.idempotency.signal.aborted, req.idempotency.validUntil > Date.now()]).toEqual([false, true])
    res.status(runs++ === 0 ? 503 : 200).send(`try ${runs}`)
  })
  app.post('/big', guard, (req, res) => res.send('x'.repeat(2000 + runs++)))
  app.post('/stream', guard, async (req, res) => {
    runs++
    res.status(200).type('text/plain')
    for (let i = 0; i < 5; i++) {
      res.write(`chunk ${i} of run ${runs}\n`)
      await new Promise((resolve) => setImmediate(resolve))
    }
    res.end('end\n')
  })
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const call = async (route, key) => {
    const res = await fetch(`http://127.0.0.1:${server.address().port}${route}`, { method: 'POST', headers: { 'idempotency-key': key } })
    return { status: res.status, text: await res.text() }
  }
  const flaky = uniqueKey('flaky')
  expect(await call('/flaky', flaky)).toEqual({ status: 503, text: 'try 1' })
  expect(await call('/flaky', flaky)).toEqual({ status: 200, text: 'try 2' })
  expect(await call('/flaky', flaky)).toEqual({ status: 200, text: 'try 2' })
  runs = 0
  const big = uniqueKey('big')
  expect((await call('/big', big)).text).toHaveLength(2000)
  expect((await call('/big', big)).text).toHaveLength(2001)
  runs = 0
  const stream = uniqueKey('stream')
  const first = await call('/stream', stream)
  expect(first.text).toContain('chunk 4 of run 1\nend\n')
  expect(await call('/stream', stream)).toEqual(first)
  expect(runs).toBe(1)
  server.close()
  await locker.close()
})
