'use strict'

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker, LockLostError } = require('../..')
const { redisCommand, startRedis } = require('../support/redis-server')
const { INSTANCE, sleep, uniqueKey, until } = require('../support/util')

const once = (emitter, event) => new Promise((resolve) => emitter.once(event, (...args) => resolve(args)))

let locker
beforeAll(() => {
  locker = createLocker({ url: process.env.REDIS_URL })
})
afterAll(() => locker.close())

/** Forks a scheduler replica whose clock is shifted by `offsetMs`; resolves once it is ready. */
async function startReplica(offsetMs) {
  const env = { ...process.env, SNATCH_TEST_CLOCK_OFFSET_MS: String(offsetMs) }
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'scheduler-replica.js'), { env })
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
  let skipped
  const overlapped = new Promise((resolve) => (skipped = resolve))
  const task = locker.schedule(uniqueKey('overlap'), '*/1 * * * * *', async () => {
    await overlapped // the run goes on until the next occurrence was skipped
    await sleep(300) // and a while after: stop() is called meanwhile, and must wait for it
    finished = true
  })
  task.on('skip', skipped)
  const skip = await overlapped
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
  await sleep(1200) // time passes: an occurrence is due in it, and must not run
  expect(runs.length).toBe(count)
  expect(() => own.schedule('again', '* * * * *', () => {})).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_CLOSED' }))
})

test.each([
  ['a bad expression', (l) => l.schedule('n', 'every minute', () => {}), TypeError, /invalid cron expression 'every minute': 5 or 6 fields .*, got 2$/],
  ['too few fields', (l) => l.schedule('n', '* * *', () => {}), TypeError, /5 or 6 fields \(minute, hour, day of month, month, day of week; a second first when 6\), got 3$/],
  ['too many fields', (l) => l.schedule('n', '* * * * * * * *', () => {}), TypeError, /5 or 6 fields .*, got 8$/],
  ['a year field', (l) => l.schedule('n', '0 0 8 * * MON-FRI 2027', () => {}), TypeError, /5 or 6 fields .*, got 7 \(a year field is not taken\)$/],
  ['a minute out of range', (l) => l.schedule('n', '61 * * * *', () => {}), TypeError, /^invalid cron expression '61 \* \* \* \*': minute '61' is out of range \(0-59\)$/],
  ['an hour out of range, with seconds', (l) => l.schedule('n', '0 0 24 * * *', () => {}), TypeError, /: hour '24' is out of range \(0-23\)$/],
  ['a day of week out of a range', (l) => l.schedule('n', '0 9 * * 1-8', () => {}), TypeError, /: day of week '1-8' is out of range \(0-7\)$/],
  ['a month that is no month', (l) => l.schedule('n', '0 0 1 JUNE *', () => {}), TypeError, /: month 'JUNE' is not valid \(1-12 or JAN-DEC: a number, a list 1,5, a range 1-5 or a step \*\/5\)$/],
  ['an unknown macro', (l) => l.schedule('n', '@fortnightly', () => {}), TypeError, /unknown macro '@fortnightly' \(expected @yearly, @annually, @monthly, @weekly, @daily, @hourly\)$/],
  ['a past year', (l) => l.schedule('n', '0 0 8 * * * 1999', () => {}), TypeError, /got 7/],
  ['no occurrence ever (February 30)', (l) => l.schedule('n', '0 0 30 2 *', () => {}), TypeError, /has no occurrence after now: it would never run/],
  ['an unknown time zone', (l) => l.schedule('n', '* * * * *', () => {}, { timezone: 'Mars/Base' }), TypeError, /unknown time zone 'Mars\/Base'/],
  ['a cron that is not a string', (l) => l.schedule('n', 5, () => {}), TypeError, /cron must be a string/],
  ['a missing fn', (l) => l.schedule('n', '* * * * *'), TypeError, /fn must be a function/],
  ['an empty name', (l) => l.schedule('', '* * * * *', () => {}), TypeError, /non-empty/],
  ['a zero ttl', (l) => l.schedule('n', '* * * * *', () => {}, { ttl: 0 }), RangeError, /ttl must be an integer number of milliseconds in \[5, 2147483647\], got 0/],
  ['a negative ttl', (l) => l.schedule('n', '* * * * *', () => {}, { ttl: -1 }), RangeError, /ttl must be an integer number of milliseconds in \[5, 2147483647\], got -1/],
  ['a zero timeout', (l) => l.schedule('n', '* * * * *', () => {}, { timeout: 0 }), RangeError, /timeout must be an integer number of milliseconds in \[1, /],
  ['an unknown concurrency', (l) => l.schedule('n', '* * * * *', () => {}, { concurrency: 'queue' }), TypeError, /^concurrency must be one of 'forbid', 'allow', 'replace', 'buffer', got 'queue'$/],
  ['a negative jitter', (l) => l.schedule('n', '* * * * *', () => {}, { jitter: -1 }), RangeError, /^jitter must be an integer number of milliseconds in \[0, 43200000\], got -1$/],
  ['a jitter over 12 hours', (l) => l.schedule('n', '* * * * *', () => {}, { jitter: 43_200_001 }), RangeError, /in \[0, 43200000\], got 43200001$/],
  ['a fractional jitter', (l) => l.schedule('n', '* * * * *', () => {}, { jitter: 1.5 }), RangeError, /got 1.5$/],
  ['a jitter that is no number', (l) => l.schedule('n', '* * * * *', () => {}, { jitter: '5s' }), TypeError, /jitter must be a number/],
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

test('a second schedule() of a name this locker runs is refused, nothing registered twice; free again once stopped', async () => {
  const own = createLocker({ url: process.env.REDIS_URL })
  const name = uniqueKey('twice')
  const runs = []
  const first = own.schedule(name, '* * * * * *', ({ tick }) => runs.push(['first', tick.getTime()]))
  let err
  try {
    own.schedule(name, '* * * * * *', ({ tick }) => runs.push(['second', tick.getTime()]))
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(TypeError)
  expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
  expect(err.message).toBe(`schedule '${name}' is already scheduled by this locker: stop() it first, or give this one another name`)
  await once(first, 'run')
  await once(first, 'run')
  expect(runs.every(([which]) => which === 'first')).toBe(true)
  const [info] = (await own.schedules()).filter((s) => s.name === name)
  expect(info.replicas).toEqual([expect.any(String)])
  await first.stop()
  const again = own.schedule(name, '* * * * * *', ({ tick }) => runs.push(['again', tick.getTime()]))
  await once(again, 'run')
  await own.close()
  expect(runs.some(([which]) => which === 'again')).toBe(true)
})

// Found by the API fuzz (api/fuzz.test.js).
// schedule() checked `cron` with the optional-option check, which let undefined through; the native side then threw
// a plain Error "Failed to convert JavaScript value `Undefined` into rust type `String`" without a code. Now it is
// TypeError ERR_SNATCH_INVALID_ARG, as for any other non-string cron.
test('schedule() with cron undefined throws ERR_SNATCH_INVALID_ARG', () => {
  let err
  try {
    locker.schedule('no-cron', undefined, () => {}).stop()
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(TypeError)
  expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
})

/** The fields of `date` in `timeZone`: weekday (0 for Sunday), month (1 to 12), hour, minute, second. */
function fieldsIn(date, timeZone) {
  const numeric = { month: 'numeric', hour: 'numeric', minute: 'numeric', second: 'numeric' }
  const format = new Intl.DateTimeFormat('en-US', { timeZone, hourCycle: 'h23', weekday: 'short', ...numeric })
  const parts = Object.fromEntries(format.formatToParts(date).map((part) => [part.type, part.value]))
  const fields = Object.fromEntries(Object.keys(numeric).map((field) => [field, Number(parts[field])]))
  return { weekday: ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'].indexOf(parts.weekday), ...fields }
}

test('accepted expressions: 5 and 6 fields, names, lists, steps, macros, time zones, each next due as written', async () => {
  const cases = [
    ['0 0 * * MON-FRI', {}, (f) => f.weekday >= 1 && f.weekday <= 5 && f.hour === 0 && f.minute === 0 && f.second === 0],
    ['*/5 1,2,3 * JAN,JUL *', {}, (f) => [1, 7].includes(f.month) && [1, 2, 3].includes(f.hour) && f.minute % 5 === 0 && f.second === 0],
    ['30 */10 * * * *', {}, (f) => f.minute % 10 === 0 && f.second === 30],
    ['@hourly', {}, (f) => f.minute === 0 && f.second === 0],
    ['@daily', { timezone: 'Europe/Paris' }, (f) => f.hour === 0 && f.minute === 0 && f.second === 0],
  ].map(([cron, options, holds]) => ({ name: uniqueKey('parse'), cron, options, holds }))
  const tasks = cases.map(({ name, cron, options }) => locker.schedule(name, cron, () => {}, options))
  try {
    let listed = []
    const registered = async () => {
      listed = await locker.schedules()
      return cases.every(({ name }) => listed.some((info) => info.name === name))
    }
    await until(registered, 'the schedules to be registered')
    for (const { name, cron, options, holds } of cases) {
      const info = listed.find((schedule) => schedule.name === name)
      expect(info.cron).toBe(cron)
      if (options.timezone) expect(info.timezone).toBe(options.timezone)
      expect(info.next.getTime()).toBeGreaterThan(Date.now())
      const asWritten = holds(fieldsIn(info.next, info.timezone))
      expect({ cron, next: info.next, asWritten }).toEqual({ cron, next: info.next, asWritten: true })
    }
  } finally {
    await Promise.all(tasks.map((task) => task.stop()))
  }
})

test('without an error listener, a failing schedule logs once to stderr and the process survives', async () => {
  // Two occurrences fail; the third closes the locker.
  const code = `
    const locker = require('.').createLocker()
    let calls = 0
    locker.schedule('nolistener:${process.pid}:${Date.now()}', '*/1 * * * * *', () => {
      if (++calls === 3) return void locker.close().then(() => process.exit(0))
      throw new Error('unheard')
    })
  `
  const child = fork('-e', [code], { cwd: path.join(__dirname, '..', '..'), env: process.env, stdio: 'pipe' })
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
  const child = fork('-e', [code], { cwd: path.join(__dirname, '..', '..'), env: process.env, stdio: ['pipe', 'pipe', 'pipe', 'ipc'] })
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
