'use strict'
// The dashboard's handler over HTTP, against a real Redis: served by node:http and mounted in Express, its JSON
// against the locker's own answers, no secrets in what it serves, and its actions only with `actions: true`, by POST
// with the page's CSRF token. (The page in a real browser: dashboard-browser.test.js.)

const http = require('node:http')
const { spawn } = require('node:child_process')
const path = require('node:path')
const express = require('express')
const { createLocker } = require('../..')
const { createDashboard } = require('redis-snatch/dashboard')
const { startRedis } = require('../support/redis-server')
const { uniqueKey, until } = require('../support/util')

const PASSWORD = 'dashboard-secret-pw'
let server
let locker
const closers = []

beforeAll(async () => {
  server = await startRedis({ args: ['--requirepass', PASSWORD], password: PASSWORD })
  locker = createLocker({ url: `redis://:${PASSWORD}@127.0.0.1:${server.port}` })
})
afterAll(async () => {
  for (const close of closers.reverse()) await close()
  await locker.close()
  await server.stop()
})

/** `handler` served on a free port of 127.0.0.1; resolves its base URL. */
async function serve(handler) {
  const listener = http.createServer(handler)
  await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve))
  closers.push(() => new Promise((resolve) => listener.close(resolve)))
  return `http://127.0.0.1:${listener.address().port}`
}

/** `fetch` that does not follow redirects. */
const get = (url, init) => fetch(url, { redirect: 'manual', ...init })

/** The CSRF token a page served at `url` carries, if any. */
async function csrfOf(url) {
  const html = await (await get(url)).text()
  return /<meta name="csrf-token" content="([^"]+)">/.exec(html)?.[1] ?? null
}

test('the page and its assets come with a Content-Security-Policy that forbids inline script; no CDN', async () => {
  const base = await serve(createDashboard(locker))
  const page = await get(`${base}/`)
  expect(page.status).toBe(200)
  expect(page.headers.get('content-security-policy')).toContain("script-src 'self'")
  expect(page.headers.get('content-security-policy')).not.toContain('unsafe-inline')
  const html = await page.text()
  expect(html).toMatch(/<script src="page.js" defer><\/script>/)
  expect(html.match(/<script/g)).toHaveLength(1) // no inline script
  expect(html).not.toMatch(/https?:\/\//)
  for (const asset of ['page.js', 'page.css']) {
    const res = await get(`${base}/${asset}`)
    expect(res.status).toBe(200)
    expect(await res.text()).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/)
  }
})

test('the state matches the locker: schedules, their next runs, the locks held; no token or password in it', async () => {
  const name = uniqueKey('dash-state')
  const task = locker.schedule(name, '*/1 * * * * *', () => {})
  const lockKey = uniqueKey('dash-lock')
  const lock = await locker.tryLock(lockKey, { ttl: 30_000 })
  const semaphoreKey = uniqueKey('dash-sem')
  const permits = [await locker.semaphore(semaphoreKey, 3).tryAcquire(), await locker.semaphore(semaphoreKey, 3).tryAcquire()]
  try {
    await new Promise((resolve) => task.once('run', resolve))
    const base = await serve(createDashboard(locker))
    const res = await get(`${base}/api/state`)
    expect(res.status).toBe(200)
    const text = await res.text()
    expect(text).not.toContain(PASSWORD)
    expect(lock.token).toMatch(/^[0-9a-f]{32}$/)
    expect(text).not.toContain(lock.token)
    const state = JSON.parse(text)
    expect(state).toMatchObject({ ok: true, actions: false, connection: { kind: 'server' } })
    expect(state.connection.servers).toEqual([
      { name: `redis://:***@127.0.0.1:${server.port}`, version: expect.stringMatching(/^(Redis|Valkey) \d/), latencyMs: expect.any(Number) },
    ])
    const listed = state.schedules.find((s) => s.name === name)
    const [fromLocker] = (await locker.schedules()).filter((s) => s.name === name)
    expect(listed).toMatchObject({ cron: '*/1 * * * * *', timezone: 'UTC', suspended: false, replicas: fromLocker.replicas })
    expect(listed.upcoming).toHaveLength(3)
    expect(listed.upcoming[1] - listed.upcoming[0]).toBe(1000)
    expect(listed.last.outcome).toBe('ok')
    const listedLock = state.locks.find((l) => l.key === lockKey)
    expect(listedLock).toEqual({ key: lockKey, holder: expect.any(String), ttl: expect.any(Number), fence: expect.any(String) })
    expect(BigInt(listedLock.fence)).toBeGreaterThanOrEqual(lock.fence) // the prefix's counter: the holder's fence or above
    expect(state.locks.map((l) => l.key)).not.toContain(semaphoreKey)
    expect(state.semaphores).toContainEqual({ key: semaphoreKey, holders: 2, limit: 3, ttl: expect.any(Number) })
    for (const permit of permits) expect(text).not.toContain(permit.token)
    const history = await (await get(`${base}/api/history?name=${encodeURIComponent(name)}`)).json()
    expect(history.records[0]).toMatchObject({ outcome: expect.any(String), why: 'on-time' })
  } finally {
    await task.stop()
    await lock.release()
    for (const permit of permits) await permit.release()
  }
})

test('read-only (the default): no CSRF token in the page, and every action endpoint answers 403, GET or POST', async () => {
  const name = uniqueKey('dash-ro')
  const task = locker.schedule(name, '@yearly', () => {})
  try {
    const base = await serve(createDashboard(locker))
    expect(await csrfOf(`${base}/`)).toBeNull()
    for (const action of ['trigger', 'suspend', 'resume', 'release']) {
      for (const method of ['GET', 'POST']) {
        const body = method === 'POST' ? JSON.stringify({ name, key: name }) : undefined
        expect((await get(`${base}/api/${action}`, { method, body })).status).toBe(403)
      }
    }
    expect((await locker.schedules()).find((s) => s.name === name).suspended).toBe(false)
  } finally {
    await task.stop()
  }
})

test('with actions: POST with the page\'s CSRF token only (never GET), and each action does what it says', async () => {
  const name = uniqueKey('dash-act')
  const runs = []
  const task = locker.schedule(name, '@yearly', ({ why }) => runs.push(why))
  try {
    const base = await serve(createDashboard(locker, { actions: true }))
    const token = await csrfOf(`${base}/`)
    expect(token).toMatch(/^[\w-]{20,}$/)
    const post = (action, body, headers = { 'x-csrf-token': token }) =>
      get(`${base}/api/${action}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
    expect((await post('suspend', { name }, {})).status).toBe(403)
    const wrong = token.slice(0, -1) + (token.endsWith('x') ? 'y' : 'x') // the token but for its last character
    expect((await post('suspend', { name }, { 'x-csrf-token': wrong })).status).toBe(403)
    expect((await get(`${base}/api/suspend?name=${name}`)).status).toBe(405)
    expect((await locker.schedules()).find((s) => s.name === name).suspended).toBe(false)

    expect((await post('suspend', { name })).status).toBe(200)
    expect((await locker.schedules()).find((s) => s.name === name).suspended).toBe(true)
    expect((await post('resume', { name })).status).toBe(200)
    expect((await locker.schedules()).find((s) => s.name === name).suspended).toBe(false)
    const triggered = await post('trigger', { name })
    expect(triggered.status).toBe(200)
    expect(await triggered.json()).toEqual({ tick: expect.any(Number) })
    const deadline = Date.now() + 10_000
    while (!runs.includes('manual') && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20))
    expect(runs).toEqual(['manual'])

    const key = uniqueKey('dash-release')
    const held = await locker.tryLock(key, { ttl: 30_000, autoExtend: true })
    expect(await (await post('release', { key })).json()).toEqual({ released: true })
    await held.extend() // refused: the lease is lost
    expect(held.signal.aborted).toBe(true)
    await held.release()
    expect((await post('trigger', { name: uniqueKey('nobody') })).status).toBe(409) // NoReplicaError
    expect((await post('trigger', {})).status).toBe(400)
  } finally {
    await task.stop()
  }
})

test('mounted in Express under a path: redirected to its trailing slash, then served; other paths go on to next()', async () => {
  const app = express()
  app.use(express.json())
  app.use('/ops/snatch', createDashboard(locker, { actions: true }))
  app.use((_req, res) => res.status(404).send('express 404'))
  const base = await serve(app)
  const bare = await get(`${base}/ops/snatch`)
  expect(bare.status).toBe(301)
  expect(bare.headers.get('location')).toBe('/ops/snatch/')
  const page = await get(`${base}/ops/snatch/`)
  expect(page.status).toBe(200)
  expect(await page.text()).toContain('<title>redis-snatch</title>')
  expect((await (await get(`${base}/ops/snatch/api/state`)).json()).ok).toBe(true)
  expect(await (await get(`${base}/ops/snatch/nothing-here`)).text()).toBe('express 404')
  // Express's JSON body parser read the body first: the action still gets it.
  const name = uniqueKey('dash-express')
  const task = locker.schedule(name, '@yearly', () => {})
  try {
    const token = await csrfOf(`${base}/ops/snatch/`)
    const res = await get(`${base}/ops/snatch/api/suspend`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-csrf-token': token },
      body: JSON.stringify({ name }),
    })
    expect(res.status).toBe(200)
    expect((await locker.schedules()).find((s) => s.name === name).suspended).toBe(true)
  } finally {
    await task.stop()
  }
})

test('a Redis that cannot be reached: the state says so (ok false, the error, no password), the page still loads', async () => {
  const down = createLocker({ url: `redis://:${PASSWORD}@127.0.0.1:${server.port + 1}`, commandTimeout: 200 })
  closers.push(() => down.close())
  const base = await serve(createDashboard(down))
  expect((await get(`${base}/`)).status).toBe(200)
  const text = await (await get(`${base}/api/state`)).text()
  expect(text).not.toContain(PASSWORD)
  expect(JSON.parse(text)).toMatchObject({ ok: false, error: expect.stringMatching(/^RedisError: /), schedules: [], locks: [] })
})

test('createDashboard refuses what is not a Locker', () => {
  expect(() => createDashboard({})).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_SNATCH_INVALID_ARG' }))
  expect(() => createDashboard(locker, 'yes')).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
})

test('npx redis-snatch dashboard serves the page on 127.0.0.1 and stops on SIGTERM', async () => {
  const cli = spawn(process.execPath, [path.join(__dirname, '..', '..', 'bin', 'redis-snatch.js'), 'dashboard', '--port', '0', '--url', `redis://127.0.0.1:${server.port}`, '--password', PASSWORD], {
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let out = ''
  const url = await new Promise((resolve, reject) => {
    cli.stdout.on('data', (chunk) => {
      out += chunk
      const found = /on (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out)
      if (found) resolve(found[1])
    })
    cli.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)))
  })
  expect(out).toContain('(read-only)')
  expect(out).not.toContain(PASSWORD)
  expect((await get(url)).status).toBe(200)
  expect((await (await get(`${url}api/state`)).json()).ok).toBe(true)
  expect((await get(`${url}api/trigger`, { method: 'POST' })).status).toBe(403)
  const exited = new Promise((resolve) => cli.once('exit', resolve))
  cli.kill('SIGTERM')
  expect(await exited).toBe(0)
})

test('stored schedules: listed a page at a time with their counts by handler; suspended and triggered by id', async () => {
  const own = createLocker({ url: `redis://:${PASSWORD}@127.0.0.1:${server.port}`, prefix: `${uniqueKey('dash-stored')}:` })
  closers.push(() => own.close())
  for (let n = 0; n < 60; n++) await own.upsertSchedule(`user:${n}`, { handler: 'digest', every: 60_000 })
  const base = await serve(createDashboard(own, { actions: true }))
  const first = await (await get(`${base}/api/stored`)).json()
  expect(first.schedules).toHaveLength(50)
  expect(first.handlers).toEqual([{ handler: 'digest', schedules: 60, overdue: 0, runners: 0 }])
  expect(typeof first.schedules[0].next).toBe('number')
  const rest = await (await get(`${base}/api/stored?cursor=${encodeURIComponent(first.cursor)}`)).json()
  expect(rest.cursor).toBeNull()
  expect(new Set([...first.schedules, ...rest.schedules].map((s) => s.id)).size).toBe(60)
  const csrf = await csrfOf(`${base}/`)
  const post = (route, body) =>
    get(`${base}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-csrf-token': csrf }, body: JSON.stringify(body) })
  expect((await post('/api/suspend', { name: 'user:7' })).status).toBe(200)
  expect((await own.getSchedule('user:7')).suspended).toBe(true)
  const runner = own.handle('digest', () => {})
  closers.push(() => runner.stop())
  // Asked again until accepted: the runner was started just before.
  let triggered
  await until(async () => (triggered = await post('/api/trigger', { name: 'user:8' })).status === 200, 'the trigger accepted', 10_000)
  expect(triggered.status).toBe(200)
})
