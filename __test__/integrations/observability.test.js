'use strict'
// What operators watch, read from Redis: the Prometheus metrics of the handler, of the dashboard and of
// `redis-snatch metrics` while replica processes run schedules (one failing, one suspended, one whose only replica was
// SIGKILLed), parsed with a real parser (and linted by promtool, with docs/operating.md's alert rules, where it is
// installed); and `redis-snatch check` with a schedule of each health.

const { execFile, spawn, spawnSync } = require('node:child_process')
const dc = require('node:diagnostics_channel')
const fs = require('node:fs')
const http = require('node:http')
const os = require('node:os')
const path = require('node:path')
const { promisify } = require('node:util')
const parsePrometheus = require('parse-prometheus-text-format')
const { createLocker } = require('../..')
const { createDashboard } = require('redis-snatch/dashboard')
const { createMetricsHandler } = require('redis-snatch/prometheus')
const { Replicas } = require('../support/replicas')
const { startRedis } = require('../support/redis-server')
const { next, sleep, uniqueKey } = require('../support/util')

jest.setTimeout(60_000)

const BIN = path.join(__dirname, '..', '..', 'bin', 'redis-snatch.js')
const PROMTOOL = spawnSync('promtool', ['--version']).status === 0 ? 'promtool' : null
if (PROMTOOL === null) {
  if (process.env.SNATCH_REQUIRE_PROMTOOL) throw new Error('promtool is required (SNATCH_REQUIRE_PROMTOOL) but missing')
  console.log('promtool checks skipped: no promtool (Debian: apt-get install prometheus)')
}
const withPromtool = PROMTOOL ? test : test.skip

/** Runs the command line with `args`; resolves `{ code, stdout, stderr }`, whatever its exit code. */
async function cli(...args) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [BIN, ...args])
    return { code: 0, stdout, stderr }
  } catch (err) {
    if (typeof err.code !== 'number') throw err
    return { code: err.code, stdout: err.stdout, stderr: err.stderr }
  }
}

/** Serves `handler` on a free loopback port; resolves its base URL and a close(). */
async function serve(handler) {
  const server = http.createServer(handler)
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return { url: `http://127.0.0.1:${server.address().port}`, close: () => new Promise((resolve) => server.close(resolve)) }
}

/** GET `url`: `{ status, type, text }`. */
async function get(url) {
  const res = await fetch(url)
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text() }
}

/** The samples of exposition `text`, parsed: `value(name, labels)` finds one (undefined when absent). */
function samples(text) {
  const families = parsePrometheus(text)
  const family = (name) => families.find((f) => f.name === name)
  const value = (name, labels = {}) => {
    const sample = family(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
    return sample === undefined ? undefined : Number(sample.value)
  }
  return { families, family, value }
}

/** Resolves once `check()` resolves true, polling every 100 ms; fails after `ms`. */
async function until(what, check, ms = 40_000) {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await sleep(100)
  }
}

describe('Prometheus', () => {
  const prefix = `${uniqueKey('prom')}:`
  const failing = 'export:nightly'
  const paused = 'report:daily'
  const gone = 'cleanup "old" \\ tmp\nfiles'
  let locker
  let replicas
  let lock
  let permit
  let text

  beforeAll(async () => {
    locker = createLocker({ url: process.env.REDIS_URL, prefix })
    replicas = new Replicas(path.join(__dirname, '..', 'support', 'workers', 'schedule-replica.js'))
    // The replica of `gone` is SIGKILLed at once: its registration lapses within 15 s, while the rest is set up.
    const [doomed] = await replicas.start(1, { message: { name: gone, cron: '0 0 1 1 *', prefix } })
    const listed = async (name) => (await locker.schedules()).find((s) => s.name === name)
    await until('the doomed replica registered', async () => (await listed(gone))?.replicas.length === 1)
    await replicas.kill(doomed)
    const pids = await replicas.start(2, { message: { name: failing, cron: '* * * * * *', fail: true, prefix } })
    for (const pid of pids) replicas.send(pid, { name: paused, cron: '* * * * * *', prefix })
    for (const pid of pids) await replicas.next((e) => e.event === 'ready' && e.pid === pid && e.name === paused, 'paused')
    await locker.suspend(paused)
    lock = await locker.tryLock('orders:4711', { ttl: 60_000 })
    permit = await locker.semaphore('exports', 3).tryAcquire({ ttl: 60_000 })
    await replicas.next((e) => e.event === 'error' && e.tick !== undefined, 'a failed attempt')
    const health = async (name) => { const all = await locker.schedules(); console.log(JSON.stringify(all.map(s => [s.name, s.health, s.replicas]))); return all.find((s) => s.name === name)?.health }
    await until('the SIGKILLed replica\'s schedule orphaned', async () => (await health(gone)) === 'orphaned')
    await until('the failing schedule failing', async () => (await health(failing)) === 'failing')
    const metrics = await serve(createMetricsHandler(locker))
    try {
      const scraped = await get(`${metrics.url}/metrics`)
      expect(scraped.status).toBe(200)
      expect(scraped.type).toBe('text/plain; version=0.0.4; charset=utf-8')
      text = scraped.text
    } finally {
      await metrics.close()
    }
  })

  afterAll(async () => {
    await lock?.release()
    await permit?.release()
    await replicas?.stop({ stop: true })
    await locker?.close()
  })

  test('each schedule: health, suspension, replicas, last outcome, recent failures, next tick', () => {
    const { value } = samples(text)
    expect(value('redis_snatch_up')).toBe(1)
    const healths = (schedule) =>
      ['ok', 'failing', 'missed', 'stuck', 'orphaned'].filter((health) => value('redis_snatch_schedule_health', { schedule, health }) === 1)
    expect(healths(failing)).toEqual(['failing'])
    expect(healths(paused)).toEqual(['ok'])
    expect(healths(gone)).toEqual(['orphaned'])
    expect(value('redis_snatch_schedule_suspended', { schedule: paused })).toBe(1)
    expect(value('redis_snatch_schedule_suspended', { schedule: failing })).toBe(0)
    expect(value('redis_snatch_schedule_replicas', { schedule: failing })).toBe(2)
    expect(value('redis_snatch_schedule_replicas', { schedule: paused })).toBe(2)
    expect(value('redis_snatch_schedule_replicas', { schedule: gone })).toBe(0)
    expect(value('redis_snatch_schedule_last_outcome', { schedule: failing, outcome: 'failed' })).toBe(1)
    expect(value('redis_snatch_schedule_last_outcome', { schedule: failing, outcome: 'ok' })).toBe(0)
    expect(value('redis_snatch_schedule_recent_failed', { schedule: failing })).toBeGreaterThanOrEqual(1)
    expect(value('redis_snatch_schedule_last_success_timestamp_seconds', { schedule: failing })).toBeUndefined()
    // Never ran: no last outcome, no success; its next tick is next New Year's midnight.
    expect(value('redis_snatch_schedule_last_outcome', { schedule: gone, outcome: 'ok' })).toBeUndefined()
    const newYear = Date.UTC(new Date().getUTCFullYear() + 1, 0, 1) / 1000
    expect(value('redis_snatch_schedule_next_timestamp_seconds', { schedule: gone })).toBe(newYear)
    const nextTick = value('redis_snatch_schedule_next_timestamp_seconds', { schedule: failing })
    expect(Math.abs(nextTick - Date.now() / 1000)).toBeLessThan(60)
  })

  test('locks held and semaphore permits; nothing truncated', () => {
    const { value } = samples(text)
    expect(value('redis_snatch_locks_held')).toBeGreaterThanOrEqual(1)
    const ttl = value('redis_snatch_lock_ttl_seconds', { key: 'orders:4711' })
    expect(ttl).toBeGreaterThan(0)
    expect(ttl).toBeLessThanOrEqual(60)
    expect(value('redis_snatch_semaphore_permits_held', { key: 'exports' })).toBe(1)
    expect(value('redis_snatch_semaphore_permits_limit', { key: 'exports' })).toBe(3)
    for (const kind of ['schedules', 'locks', 'semaphores']) expect(value('redis_snatch_scrape_truncated', { kind })).toBe(0)
  })

  test('stored schedules: one series per handler, none per schedule; overdue ones counted', async () => {
    const own = createLocker({ url: process.env.REDIS_URL, prefix: `${uniqueKey('prom-stored')}:` })
    try {
      for (let n = 0; n < 5; n++) await own.upsertSchedule(`user:${n}`, { handler: 'digest', every: 60_000 })
      await own.upsertSchedule('late', { handler: 'cleanup', at: Date.now() - 61_000, startingDeadline: 3_600_000 })
      const metrics = createMetricsHandler(own)
      const exposition = await new Promise((resolve) => {
        const res = { writeHead() {}, end: resolve }
        metrics({ method: 'GET', url: '/metrics' }, res)
      })
      const { value } = samples(exposition)
      expect(value('redis_snatch_stored_schedules', { handler: 'digest' })).toBe(5)
      expect(value('redis_snatch_stored_overdue', { handler: 'digest' })).toBe(0)
      expect(value('redis_snatch_stored_overdue', { handler: 'cleanup' })).toBe(1)
      expect(value('redis_snatch_stored_runners', { handler: 'digest' })).toBe(0)
      expect(exposition).not.toContain('user:')
    } finally {
      await own.close()
    }
  })

  test('every family has its HELP and TYPE; a name with quotes, a backslash and a newline is escaped', () => {
    const { families } = samples(text)
    for (const family of families) {
      expect(family.help).not.toBe('')
      expect(family.type).toBe('GAUGE')
      expect(family.name).toMatch(/^redis_snatch_[a-z_]+$/)
    }
    expect(text).toContain('schedule="cleanup \\"old\\" \\\\ tmp\\nfiles"')
    expect(text.split('\n').filter((line) => line.startsWith('cleanup'))).toEqual([])
  })

  withPromtool('promtool finds the exposition well-formed and the documented alert rules fire as written', () => {
    const lint = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    expect({ status: lint.status, output: lint.stdout + lint.stderr }).toEqual({ status: 0, output: '' })
    const guide = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'operating.md'), 'utf8')
    const rules = guide.match(/<!-- alert rules -->\n```yaml\n([\s\S]*?)```/)[1]
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'snatch-rules-'))
    try {
      fs.writeFileSync(path.join(dir, 'rules.yml'), rules)
      fs.copyFileSync(path.join(__dirname, '..', 'support', 'alert-rules.test.yml'), path.join(dir, 'rules.test.yml'))
      const checked = spawnSync(PROMTOOL, ['check', 'rules', path.join(dir, 'rules.yml')], { encoding: 'utf8' })
      expect({ status: checked.status, output: checked.stderr }).toEqual({ status: 0, output: '' })
      const tested = spawnSync(PROMTOOL, ['test', 'rules', path.join(dir, 'rules.test.yml')], { encoding: 'utf8' })
      expect({ status: tested.status, output: tested.stdout + tested.stderr }).toMatchObject({ status: 0 })
    } finally {
      fs.rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the dashboard serves the same metrics at metrics', async () => {
    const dashboard = await serve(createDashboard(locker))
    try {
      const { status, type, text: served } = await get(`${dashboard.url}/metrics`)
      expect({ status, type }).toEqual({ status: 200, type: 'text/plain; version=0.0.4; charset=utf-8' })
      expect(samples(served).value('redis_snatch_schedule_health', { schedule: gone, health: 'orphaned' })).toBe(1)
    } finally {
      await dashboard.close()
    }
  })

  test('`redis-snatch metrics` serves them until SIGTERM; --limit caps the lists and says so', async () => {
    const child = spawn(process.execPath, [BIN, 'metrics', '--port', '0', '--prefix', prefix, '--limit', '1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    const exited = new Promise((resolve) => child.once('exit', resolve))
    try {
      const line = await new Promise((resolve) => child.stdout.once('data', (chunk) => resolve(String(chunk))))
      const url = line.match(/(http:\/\/\S+\/metrics)/)[1]
      const { status, text: served } = await get(url)
      expect(status).toBe(200)
      const { value, family } = samples(served)
      // Schedules by name: the first of the three is the SIGKILLed one.
      expect(family('redis_snatch_schedule_health').metrics.map((m) => m.labels.schedule)).toEqual(Array(5).fill(gone))
      expect(value('redis_snatch_scrape_truncated', { kind: 'schedules' })).toBe(1)
      expect(value('redis_snatch_semaphore_permits_held', { key: 'exports' })).toBe(1)
      expect((await get(url.replace('/metrics', '/'))).status).toBe(404)
    } finally {
      child.kill('SIGTERM')
    }
    expect(await exited).toBe(0)
  })

  test('a Redis that is down: redis_snatch_up 0, with the error code and no password', async () => {
    const server = await startRedis()
    await server.kill()
    const secret = 'prom-secret-71c'
    const down = createLocker({ url: `redis://:${secret}@127.0.0.1:${server.port}` })
    try {
      const metrics = await serve(createMetricsHandler(down))
      const { text: served } = await get(`${metrics.url}/metrics`).finally(() => metrics.close())
      const { value } = samples(served)
      expect(value('redis_snatch_up')).toBe(0)
      expect(value('redis_snatch_scrape_error', { code: 'ERR_SNATCH_REDIS' })).toBe(1)
      expect(served).not.toContain(secret)
    } finally {
      await down.close()
    }
  })

  test('bad options are refused with a code', () => {
    expect(() => createMetricsHandler({})).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
    expect(() => createMetricsHandler(locker, { limit: 0 })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
    expect(() => createMetricsHandler(locker, { limt: 5 })).toThrow(/did you mean 'limit'/)
  })
})

describe('check', () => {
  const prefix = `${uniqueKey('check')}:`
  let locker
  let release
  const tasks = []

  /** Schedules `name` here with `fn` and `options`, every second unless `cron` says. */
  const schedule = (name, fn, options, cron = '* * * * * *') => {
    const task = locker.schedule(name, cron, fn, options)
    task.on('error', () => {})
    tasks.push(task)
    return task
  }

  beforeAll(async () => {
    locker = createLocker({ url: process.env.REDIS_URL, prefix })
    const hang = new Promise((resolve) => (release = resolve))
    const ran = next(schedule('healthy', () => {}), 'run')
    const failed = next(schedule('failing', () => Promise.reject(new Error('no'))), 'error')
    const started = new Promise((resolve) => schedule('stuck', () => (resolve(), hang), { maxRuntime: 300 }))
    const orphaned = schedule('orphaned', () => {})
    await Promise.all([ran, failed, started, next(orphaned, 'run')])
    await orphaned.stop()
    // Missed: registered, stopped before its tick, registered again once its startingDeadline has passed.
    const tick = Math.ceil((Date.now() + 1500) / 1000) * 1000
    const at = new Date(tick)
    const cron = `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`
    await schedule('missed', () => {}, { startingDeadline: 500 }, cron).stop()
    await sleep(tick + 3000 - Date.now())
    const recorded = new Promise((resolve) => dc.subscribe('redis-snatch:missed', function seen(m) {
      if (m.schedule !== 'missed') return
      dc.unsubscribe('redis-snatch:missed', seen)
      resolve(m)
    }))
    schedule('missed', () => {}, { startingDeadline: 500 }, cron)
    expect(await recorded).toMatchObject({ reason: 'deadline' })
    await until('the stuck attempt past maxRuntime', async () => (await locker.schedules()).find((s) => s.name === 'stuck').health === 'stuck')
  })

  afterAll(async () => {
    release?.()
    await Promise.all(tasks.map((task) => task.stop()))
    await locker?.close()
  })

  test('a healthy schedule exits 0', async () => {
    const { code, stdout } = await cli('check', 'healthy', '--prefix', prefix)
    expect({ code, stdout }).toEqual({ code: 0, stdout: "'healthy' is healthy\n" })
  })

  test('all of them: exit 1, each unhealthy one with its health, in JSON and as text', async () => {
    const json = await cli('check', '--prefix', prefix, '--json')
    expect(json.code).toBe(1)
    const report = JSON.parse(json.stdout)
    expect(report).toMatchObject({ healthy: false, checked: 5 })
    const healths = Object.fromEntries(report.unhealthy.map((u) => [u.name, u.health]))
    expect(healths).toEqual({ failing: 'failing', missed: 'missed', orphaned: 'orphaned', stuck: 'stuck' })
    const { code, stdout } = await cli('check', '--prefix', prefix)
    expect(code).toBe(1)
    expect(stdout).toMatch(/^NAME\s+HEALTH\s+WHY/)
    expect(stdout).toMatch(/^failing\s+failing\s+last failed .*: no; no ok run recorded$/m)
    expect(stdout).toMatch(/^missed\s+missed\s+tick .* missed \(deadline\)/m)
    expect(stdout).toMatch(/^stuck\s+stuck\s+running past its timeout or maxRuntime/m)
    expect(stdout).toMatch(/^orphaned\s+orphaned\s+no live replica registers it/m)
    expect(stdout).not.toMatch(/^healthy/m)
  })

  test('names picked: only those; a name no replica registered is unknown, exit 1', async () => {
    expect((await cli('check', 'healthy', 'stuck', '--prefix', prefix)).code).toBe(1)
    const { code, stdout } = await cli('check', 'healthy', 'nosuch', '--prefix', prefix, '--json')
    expect(code).toBe(1)
    expect(JSON.parse(stdout).unhealthy).toEqual([{ name: 'nosuch', health: 'unknown', why: expect.stringContaining(prefix) }])
  })

  test('bad usage exits 2; a wrong password exits 1 without printing it', async () => {
    for (const args of [['check', '--port', '9'], ['check', '--limit', '3'], ['check', '--actions']]) {
      const { code, stderr } = await cli(...args)
      expect(code).toBe(2)
      expect(stderr).toMatch(/^usage: redis-snatch /m)
    }
    const server = await startRedis({ args: ['--requirepass', 'right-pass-0d2'], password: 'right-pass-0d2' })
    try {
      const secret = 'wrong-pass-5f9'
      const { code, stdout, stderr } = await cli('check', '--url', server.url, '--password', secret)
      expect(code).toBe(1)
      expect(stdout).toBe('')
      expect(stderr).toMatch(/ERR_SNATCH_REDIS|credentials/)
      expect(stdout + stderr).not.toContain(secret)
    } finally {
      await server.stop()
    }
  })
})

test('lastSuccess outlives the records kept: a schedule that failed more often than it keeps records still tells it', async () => {
  const locker = createLocker({ url: process.env.REDIS_URL, prefix: `${uniqueKey('last-ok')}:` })
  try {
    let calls = 0
    const task = locker.schedule('flaky', '* * * * * *', () => {
      calls++
      if (calls > 1) throw new Error('down')
    }, { history: 2 })
    task.on('error', () => {})
    const ran = await next(task, 'run')
    let failures = 0
    await next(task, 'error', () => ++failures === 3)
    await task.stop()
    const [info] = await locker.schedules()
    expect(info.recent).toEqual({ records: 2, ok: 0, failed: 2, missed: 0 })
    expect(info.health).toBe('orphaned')
    // Ended after the ok attempt's tick, before the first failure's record.
    expect(info.lastSuccess.getTime()).toBeGreaterThanOrEqual(ran.tick.getTime())
    expect(info.lastSuccess.getTime()).toBeLessThanOrEqual(info.last.started.getTime())
  } finally {
    await locker.close()
  }
})
