'use strict'

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker, LockLostError } = require('..')
const { redisCommand, startRedis } = require('./support/redis-server')
const { INSTANCE, uniqueKey } = require('./support/util')

const once = (emitter, event) => new Promise((resolve) => emitter.once(event, (...args) => resolve(args)))

let locker
beforeAll(() => {
  locker = createLocker({ url: process.env.REDIS_URL })
})
afterAll(() => locker.close())

/** Forks a scheduler replica whose clock is shifted by `offsetMs`; resolves once it is ready. */
async function startReplica(offsetMs) {
  const env = { ...process.env, SNATCH_TEST_CLOCK_OFFSET_MS: String(offsetMs) }
  const child = fork(path.join(__dirname, 'support', 'scheduler-replica.js'), { env })
  await once(child, 'message')
  return child
}

test('three replica processes, clocks skewed by up to 500 ms: every occurrence ran exactly once', async () => {
  const replicas = await Promise.all([0, 250, 500].map(startReplica))
  const reports = replicas.map((child) => once(child, 'message').then(([report]) => report))
  const job = { name: uniqueKey('cluster'), cron: '*/1 * * * * *', durationMs: 8000, workMs: 50 }
  for (const child of replicas) child.send(job)
  const all = await Promise.all(reports)
  const ran = all.flatMap((r) => r.ran).sort()
  expect(all.flatMap((r) => r.errors)).toEqual([])
  expect(new Set(ran).size).toBe(ran.length)
  expect(ran.length).toBeGreaterThanOrEqual(6)
  // Consecutive seconds: no occurrence between the first and the last run went missing.
  expect((ran[ran.length - 1] - ran[0]) / 1000 + 1).toBe(ran.length)
  // The replicas that did not run an occurrence saw it taken.
  expect(all.flatMap((r) => r.skipped).filter((s) => s.reason !== 'taken')).toEqual([])
}, 20000)

test('the task gets tick, fence, key, signal and validUntil; run events carry them', async () => {
  const name = uniqueKey('ctx')
  let ctx
  let lease
  const task = locker.schedule(
    name,
    '*/1 * * * * *',
    (c) => {
      ctx = c
      lease = { validUntil: c.validUntil, now: Date.now() }
      return 'value'
    },
    { ttl: 5000 },
  )
  const [run] = await once(task, 'run')
  await task.stop()
  expect(run.tick).toBeInstanceOf(Date)
  expect(run.tick.getMilliseconds()).toBe(0)
  expect(typeof run.fence).toBe('bigint')
  expect(run.durationMs).toBeGreaterThanOrEqual(0)
  expect(ctx.tick.getTime()).toBe(run.tick.getTime())
  expect(ctx.fence).toBe(run.fence)
  expect(ctx.key).toBe(`${name}:${run.tick.getTime()}`)
  expect(ctx.signal.aborted).toBe(false)
  // While fn runs, its lease is guaranteed for most of ttl; once the run ended, for no longer.
  expect(lease.validUntil).toBeGreaterThan(lease.now + 4000)
  expect(lease.validUntil).toBeLessThanOrEqual(lease.now + 5000)
  expect(ctx.validUntil).toBeLessThanOrEqual(Date.now())
  expect(task.name).toBe(name)
  expect([ctx.attempt, ctx.why, run.attempt, run.why]).toEqual([1, 'on-time', 1, 'on-time'])
  // Redis keeps the record of the run, which a lagging replica finds (it does not run the occurrence again).
  const [record] = await locker.history(name)
  expect(record).toMatchObject({ tick: run.tick, attempt: 1, why: 'on-time', fence: run.fence, outcome: 'ok' })
  expect(record.instance).toBe(INSTANCE)
})

test('a rejected fn emits error and the schedule keeps going', async () => {
  const task = locker.schedule(uniqueKey('reject'), '*/1 * * * * *', async ({ tick }) => {
    throw Object.assign(new Error('job failed'), { at: tick })
  })
  const [first, info] = await once(task, 'error')
  const [second] = await once(task, 'error')
  await task.stop()
  expect(first.message).toBe('job failed')
  expect(first.at.getTime()).toBe(info.tick.getTime())
  expect(second.at.getTime()).toBeGreaterThan(first.at.getTime())
})

test('a run still going at the next occurrence skips it as an overlap; stop() waits for the run', async () => {
  let finished = false
  const task = locker.schedule(uniqueKey('overlap'), '*/1 * * * * *', async () => {
    await new Promise((resolve) => setTimeout(resolve, 1600))
    finished = true
  })
  const [skip] = await once(task, 'skip')
  expect(skip.reason).toBe('overlap')
  await task.stop()
  expect(finished).toBe(true)
})

test('losing the lease mid-run aborts the signal and emits LockLostError with the value', async () => {
  const name = uniqueKey('lost')
  const task = locker.schedule(
    name,
    '*/1 * * * * *',
    async ({ signal }) => {
      await redisCommand(process.env.REDIS_URL, 'DEL', `snatch:${name}`)
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
      return 'aborted'
    },
    { ttl: 600 },
  )
  const [err] = await once(task, 'error')
  await task.stop()
  expect(err).toBeInstanceOf(LockLostError)
  expect(err.value).toBe('aborted')
})

test('a Redis failure while claiming emits a RedisError and fn does not run', async () => {
  const server = await startRedis()
  const down = createLocker({ url: server.url, commandTimeout: 200 })
  await server.kill()
  let ran = false
  const task = down.schedule(uniqueKey('down'), '*/1 * * * * *', () => {
    ran = true
  })
  const [err, { tick }] = await once(task, 'error')
  await down.close()
  expect(err.code).toBe('ERR_SNATCH_REDIS')
  expect(tick).toBeInstanceOf(Date)
  expect(ran).toBe(false)
})

test('close() stops every schedule', async () => {
  const own = createLocker({ url: process.env.REDIS_URL })
  const runs = []
  const task = own.schedule(uniqueKey('close'), '*/1 * * * * *', ({ tick }) => runs.push(tick))
  await once(task, 'run')
  await own.close()
  const count = runs.length
  await new Promise((resolve) => setTimeout(resolve, 1200))
  expect(runs.length).toBe(count)
  expect(() => own.schedule('again', '* * * * *', () => {})).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_CLOSED' }))
})

test.each([
  ['a bad expression', (l) => l.schedule('n', 'every minute', () => {}), TypeError, /invalid cron expression/],
  ['too many fields', (l) => l.schedule('n', '* * * * * * * *', () => {}), TypeError, /got 8/],
  ['a year field', (l) => l.schedule('n', '0 0 8 * * MON-FRI 2027', () => {}), TypeError, /6 \(seconds first\), got 7 \(a year field is not taken\)/],
  ['a past year', (l) => l.schedule('n', '0 0 8 * * * 1999', () => {}), TypeError, /got 7/],
  ['no occurrence ever (February 30)', (l) => l.schedule('n', '0 0 30 2 *', () => {}), TypeError, /has no occurrence after now: it would never run/],
  ['an unknown time zone', (l) => l.schedule('n', '* * * * *', () => {}, { timezone: 'Mars/Base' }), TypeError, /unknown time zone 'Mars\/Base'/],
  ['a cron that is not a string', (l) => l.schedule('n', 5, () => {}), TypeError, /cron must be a string/],
  ['a missing fn', (l) => l.schedule('n', '* * * * *'), TypeError, /fn must be a function/],
  ['an empty name', (l) => l.schedule('', '* * * * *', () => {}), TypeError, /non-empty/],
  ['a zero ttl', (l) => l.schedule('n', '* * * * *', () => {}, { ttl: 0 }), RangeError, /ttl must be an integer number of milliseconds in \[5, 2147483647\], got 0/],
  ['a negative ttl', (l) => l.schedule('n', '* * * * *', () => {}, { ttl: -1 }), RangeError, /ttl must be an integer number of milliseconds in \[5, 2147483647\], got -1/],
  ['a zero timeout', (l) => l.schedule('n', '* * * * *', () => {}, { timeout: 0 }), RangeError, /timeout must be an integer number of milliseconds in \[1, /],
])('schedule() with %s throws synchronously with ERR_SNATCH_INVALID_ARG', (_name, call, Class, message) => {
  let err
  try {
    call(locker)
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(Class)
  expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
  expect(err.message).toMatch(message)
})

test('accepted expressions: 5 and 6 fields, names, lists, steps, macros, time zones', () => {
  for (const [cron, options] of [
    ['0 0 * * MON-FRI', {}],
    ['*/5 1,2,3 * JAN,JUL *', {}],
    ['30 */10 * * * *', {}],
    ['@hourly', {}],
    ['@daily', { timezone: 'Europe/Paris' }],
  ]) {
    const task = locker.schedule(uniqueKey('parse'), cron, () => {}, options)
    task.stop()
  }
})

test('without an error listener, a failing schedule logs once to stderr and the process survives', async () => {
  const code = `
    const locker = require('.').createLocker()
    locker.schedule('nolistener:${process.pid}:${Date.now()}', '*/1 * * * * *', () => { throw new Error('unheard') })
    setTimeout(() => locker.close().then(() => process.exit(0)), 2500)
  `
  const child = fork('-e', [code], { cwd: path.join(__dirname, '..'), env: process.env, stdio: 'pipe' })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  const [status] = await once(child, 'exit')
  expect(status).toBe(0)
  expect(stderr.match(/unheard/g)).toHaveLength(1)
  expect(stderr).toContain("no 'error' listener")
})

test('without an error listener, Redis going down and coming back is logged once each, for a schedule', async () => {
  const server = await startRedis()
  const code = `
    const locker = require('.').createLocker({ url: '${server.url}', commandTimeout: 200 })
    locker.schedule('outage', '*/1 * * * * *', () => {})
    process.on('message', () => locker.close().then(() => process.exit(0)))
  `
  const child = fork('-e', [code], { cwd: path.join(__dirname, '..'), env: process.env, stdio: ['pipe', 'pipe', 'pipe', 'ipc'] })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  /** Resolves once stderr matches `pattern`. */
  const logged = (pattern) =>
    new Promise((resolve) => {
      const check = () => pattern.test(stderr) && (child.stderr.off('data', check), resolve())
      child.stderr.on('data', check)
      check()
    })
  try {
    await server.kill()
    await logged(/cannot claim its occurrences/)
    await server.restart()
    await logged(/claims its occurrences again/)
    child.send('close')
    const [status] = await once(child, 'exit')
    expect(status).toBe(0)
  } finally {
    child.kill()
    await server.stop()
  }
  expect(stderr.match(/cannot claim its occurrences/g)).toHaveLength(1)
  expect(stderr.match(/claims its occurrences again/g)).toHaveLength(1)
  expect(stderr).toMatch(/schedule 'outage' cannot claim its occurrences, from \S+ on \(no 'error' listener; said again when it can\): redis:\/\/127\.0\.0\.1:\d+: (cannot connect|connection failed|timed out)/)
}, 30_000)
