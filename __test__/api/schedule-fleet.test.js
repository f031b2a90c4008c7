'use strict'
// Schedules that lose no occurrence, with replica processes: late runs after every replica was down at the tick, a
// dead runner's attempt taken over, retries, suspend and trigger from another process, concurrency policies,
// timeouts, and records bounded and expiring.

const path = require('node:path')
const { createLocker, RunReplacedError, RunTimeoutError } = require('../..')
const { redisCommand } = require('../support/redis-server')
const { Replicas } = require('../support/replicas')
const { uniqueKey, sleep, until } = require('../support/util')

jest.setTimeout(60_000)

let locker
beforeAll(() => {
  locker = createLocker({ url: process.env.REDIS_URL })
})
afterAll(() => locker.close())

let replicas
beforeEach(() => {
  replicas = new Replicas(path.join(__dirname, '..', 'support', 'workers', 'schedule-replica.js'))
})
afterEach(() => replicas.killAll())

/** A daily cron whose one occurrence today is the first whole second at least `ms` from now: `{ cron, tick }`. */
function tickIn(ms) {
  const tick = Math.ceil((Date.now() + ms) / 1000) * 1000
  const at = new Date(tick)
  return { cron: `${at.getUTCSeconds()} ${at.getUTCMinutes()} ${at.getUTCHours()} * * *`, tick }
}

/** Resolves once `Date.now()` is past `ms` (time passes: to a moment of the schedule). */
async function untilTime(ms) {
  await sleep(Math.max(0, ms - Date.now()))
}

/** Schedule `name`'s records of occurrence `tick`, once `done(records)` holds for them (polling the fleet's view). */
async function recordsOf(name, tick, done = (records) => records.length > 0) {
  let records
  const read = async () => {
    records = (await locker.history(name, { limit: 100 })).filter((r) => r.tick.getTime() === tick)
    return done(records)
  }
  await until(read, `the records of ${name} at ${tick}`, 20_000)
  return records
}

test('every replica down across a tick, one back within startingDeadline: the occurrence runs once, late', async () => {
  const name = uniqueKey('late')
  const { cron, tick } = tickIn(5000)
  const job = { name, cron, options: { startingDeadline: 15_000 } }
  // Registered (the schedule counts occurrences from now on), then all gone before the tick.
  const pids = await replicas.start(3, { message: job })
  for (const pid of pids) await replicas.kill(pid)
  expect(Date.now()).toBeLessThan(tick)
  await untilTime(tick + 300)
  await replicas.start(1, { message: job })
  const late = await replicas.next((e) => e.event === 'run' && e.tick === tick, 'the late run')
  expect(late.why).toBe('late')
  const records = await recordsOf(name, tick)
  expect(records).toHaveLength(1)
  expect(records[0]).toMatchObject({ attempt: 1, why: 'late', outcome: 'ok' })
  expect(records[0].started.getTime()).toBeGreaterThan(tick)
  expect(replicas.all((e) => e.event === 'start' && e.tick === tick)).toHaveLength(1)
})

test('every replica down past startingDeadline: the occurrence does not run, and is recorded missed', async () => {
  const name = uniqueKey('missed')
  const { cron, tick } = tickIn(5000)
  const job = { name, cron, options: { startingDeadline: 1000 } }
  for (const pid of await replicas.start(3, { message: job })) await replicas.kill(pid)
  await untilTime(tick + 300)
  await replicas.start(1, { message: job })
  const [record] = await recordsOf(name, tick)
  expect(record).toMatchObject({ attempt: 1, outcome: 'missed', reason: 'deadline', instance: null, fence: null })
  expect(replicas.all((e) => e.event === 'start' && e.tick === tick)).toEqual([])
})

test("SIGKILL of the replica running an occurrence: another runs it again, with a higher fence, once", async () => {
  const name = uniqueKey('crash')
  const { cron, tick } = tickIn(3000)
  await replicas.start(3, { message: { name, cron, hangFirst: true, options: { ttl: 1500 } } })
  const first = await replicas.next((e) => e.event === 'start' && e.tick === tick, 'the first attempt')
  await replicas.kill(first.pid)
  const second = await replicas.next((e) => e.event === 'run' && e.tick === tick, 'the attempt that takes over')
  expect(second).toMatchObject({ attempt: 2, why: 'retry' })
  expect(second.pid).not.toBe(first.pid)
  const started = replicas.all((e) => e.event === 'start' && e.tick === tick)
  expect(started.map((e) => e.attempt)).toEqual([1, 2])
  expect(BigInt(started[1].fence)).toBeGreaterThan(BigInt(started[0].fence))
  const records = await recordsOf(name, tick, (r) => r.length === 2 && r.every((x) => x.outcome !== 'running'))
  expect(records.map((r) => [r.attempt, r.outcome])).toEqual([[2, 'ok'], [1, 'crashed']])
})

test('fn rejects twice, then resolves, with retries: 2: three attempts, one run, all recorded', async () => {
  const name = uniqueKey('retries')
  const { cron, tick } = tickIn(1500)
  const attempts = []
  const task = locker.schedule(
    name,
    cron,
    ({ attempt, why }) => {
      attempts.push([attempt, why])
      if (attempt < 3) throw new Error(`attempt ${attempt} failed`)
    },
    { retries: 2, retryDelay: 100 },
  )
  const errors = []
  task.on('error', (err, info) => errors.push([err.message, info.attempt]))
  const run = await new Promise((resolve) => task.once('run', resolve))
  await task.stop()
  expect(run).toMatchObject({ tick: new Date(tick), attempt: 3, why: 'retry' })
  expect(attempts).toEqual([[1, 'on-time'], [2, 'retry'], [3, 'retry']])
  expect(errors).toEqual([['attempt 1 failed', 1], ['attempt 2 failed', 2]])
  const records = await recordsOf(name, tick)
  expect(records.map((r) => [r.attempt, r.outcome, r.error])).toEqual([
    [3, 'ok', undefined],
    [2, 'failed', 'attempt 2 failed'],
    [1, 'failed', 'attempt 1 failed'],
  ])
  expect(records[1].retryAt).toBeInstanceOf(Date)
})

test('suspend from a fourth process stops runs on all three replicas until resume; trigger runs exactly one', async () => {
  const name = uniqueKey('steer')
  const pids = await replicas.start(3, { message: { name, cron: '* * * * * *' } })
  await replicas.next((e) => e.event === 'run', 'a first run')
  await locker.suspend(name)
  const suspendedAt = Date.now()
  // Every replica hears of it, and skips the occurrences it does not win as suspended too.
  for (const pid of pids) {
    await replicas.next((e) => e.event === 'skip' && e.reason === 'suspended' && e.pid === pid, 'a suspended skip')
  }
  const [info] = (await locker.schedules()).filter((s) => s.name === name)
  expect(info.suspended).toBe(true)
  expect(info.replicas).toHaveLength(3)
  // One run now, while suspended (an operator's explicit ask), on exactly one replica.
  const { tick } = await locker.trigger(name)
  const manual = await replicas.next((e) => e.event === 'run' && e.why === 'manual', 'the manual run')
  expect(manual.tick).toBe(tick.getTime())
  const lastSkip = await replicas.next((e) => e.event === 'skip' && e.tick > manual.tick + 1000, 'a later skip')
  expect(lastSkip.reason).toBe('suspended')
  const onTimeWhileSuspended = replicas.all((e) => e.event === 'start' && e.why === 'on-time' && e.tick > suspendedAt + 1000)
  expect(onTimeWhileSuspended).toEqual([])
  await locker.resume(name)
  const resumedAt = Date.now()
  await replicas.next((e) => e.event === 'run' && e.why === 'on-time' && e.tick > resumedAt, 'a run after resume')
  expect(replicas.all((e) => e.event === 'start' && e.why === 'manual')).toHaveLength(1)
  const manualRecords = (await locker.history(name, { limit: 100 })).filter((r) => r.why === 'manual')
  expect(manualRecords).toHaveLength(1)
  expect(manualRecords[0]).toMatchObject({ outcome: 'ok', manual: true })
  await replicas.stop({ stop: true })
})

// locks() and schedules() (so the command line and the dashboard) scanned for ever, a core busy, under a prefix with a
// '}' (say '{app}:', the docs' advice for a cluster): the key that routes the scan, `{<prefix><n>}`, had its hash
// tag closed inside the prefix, and a key for the slot wanted was looked for among keys all in one other slot.
test("under a prefix that is a hash tag ('{app}:'), locks() and schedules() answer", async () => {
  const tagged = createLocker({ url: process.env.REDIS_URL, prefix: `{app-${process.pid}}:` })
  try {
    const name = uniqueKey('tagged-schedule')
    const task = tagged.schedule(name, '@yearly', () => {})
    const lock = await tagged.tryLock('held', { ttl: 30_000 })
    const locks = await tagged.locks()
    expect(locks.map((l) => l.key)).toEqual(['held'])
    // Registered by the schedule's first beat, at once.
    await until(async () => (await tagged.schedules()).some((s) => s.name === name), 'the schedule to be registered')
    await lock.release()
    await task.stop()
  } finally {
    await tagged.close()
  }
})

test("trigger rejects NoReplicaError when no live replica registered the schedule", async () => {
  const err = await locker.trigger(uniqueKey('nobody')).catch((e) => e)
  expect(err.code).toBe('ERR_SNATCH_NO_REPLICA')
  expect(err.name).toBe('NoReplicaError')
})

test("'replace' aborts the running attempt's signal before the next occurrence starts", async () => {
  const starts = []
  let aborted
  const task = locker.schedule(
    uniqueKey('replace'),
    '* * * * * *',
    async ({ signal, tick }) => {
      starts.push({ tick: tick.getTime(), at: Date.now() })
      if (starts.length > 1) return
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
      aborted = { at: Date.now(), reason: signal.reason }
    },
    { concurrency: 'replace' },
  )
  const [err] = await new Promise((resolve) => task.once('error', (...args) => resolve(args)))
  await new Promise((resolve) => task.once('run', resolve))
  await task.stop()
  expect(err).toBeInstanceOf(RunReplacedError)
  expect(err.code).toBe('ERR_SNATCH_REPLACED')
  expect(aborted.reason).toBe(err)
  expect(starts[1].at).toBeGreaterThanOrEqual(aborted.at)
  expect(starts[1].tick).toBeGreaterThan(starts[0].tick)
})

test("'allow' runs an occurrence while the previous one still runs", async () => {
  const spans = []
  const task = locker.schedule(
    uniqueKey('allow'),
    '* * * * * *',
    async () => {
      // Whether the run before this one was still running when this one began (times in ms could tie).
      const span = { beside: spans.length > 0 && spans[spans.length - 1].end === undefined }
      spans.push(span)
      // The first run goes on until the next occurrence started beside it (which 'skip' would not let happen).
      if (spans.length === 1) await until(() => spans.length >= 2, 'the next occurrence to run beside this one', 5000)
      span.end = true
    },
    { concurrency: 'allow' },
  )
  const failed = new Promise((resolve) => task.once('error', resolve))
  const both = new Promise((resolve) => task.on('run', () => spans[0]?.end && spans.length >= 2 && resolve()))
  const err = await Promise.race([failed, both])
  await task.stop()
  expect(err).toBeUndefined()
  expect(spans[1].beside).toBe(true)
})

test("'buffer' on three replicas: an occurrence due while one runs waits and runs right after it, never two waiting, each once", async () => {
  const name = uniqueKey('buffer')
  const job = { name, cron: '* * * * * *', options: { concurrency: 'buffer' }, workMs: 2300 }
  await replicas.start(3, { message: job })
  const from = Date.now() + 1000
  // Five runs, each taking 2.3 s while an occurrence is due every second.
  await replicas.next((e) => e.event === 'end' && e.tick > from && replicas.all((s) => s.event === 'end' && s.tick > from).length >= 5, 'five runs')
  await replicas.stop({ stop: true })
  const ends = new Map(replicas.all((e) => e.event === 'end').map((e) => [e.tick, e.at]))
  const runs = replicas.all((e) => e.event === 'start' && e.tick > from && ends.has(e.tick)).sort((a, b) => a.at - b.at)
  expect(new Set(runs.map((r) => r.tick)).size).toBe(runs.length)
  // One at a time, in tick order, each after the one before ended.
  for (let i = 1; i < runs.length; i++) {
    expect(runs[i].tick).toBeGreaterThan(runs[i - 1].tick)
    expect(runs[i].at).toBeGreaterThanOrEqual(ends.get(runs[i - 1].tick))
  }
  // After each run comes an occurrence that was due while it ran, and waited (with 'forbid' it would have been
  // skipped); of the occurrences due while one ran, one ran after it (never two waited), and the others were skipped
  // as overlaps.
  for (let i = 1; i < runs.length; i++) {
    const previous = runs[i - 1]
    expect(runs[i].tick).toBeLessThan(ends.get(previous.tick))
    const due = runs.filter((r) => r.tick > previous.at && r.tick < ends.get(previous.tick))
    expect(due.length).toBeLessThanOrEqual(1)
  }
  const last = runs.at(-1).tick
  const records = (await locker.history(name, { limit: 100 })).filter((r) => r.tick.getTime() > runs[0].tick && r.tick.getTime() < last)
  for (let tick = runs[0].tick + 1000; tick < last; tick += 1000) {
    const of = records.filter((r) => r.tick.getTime() === tick)
    const ran = runs.some((r) => r.tick === tick)
    expect(of).toEqual([ran ? expect.objectContaining({ outcome: 'ok' }) : expect.objectContaining({ outcome: 'missed', reason: 'overlap' })])
    // A replica that finds the slot held says 'overlap' (one that comes once the claim was given back, too).
    if (!ran) expect(replicas.all((e) => e.event === 'skip' && e.tick === tick && e.reason === 'overlap').length).toBeGreaterThanOrEqual(1)
  }
})

/** Schedule `name`'s jitter offset for `tick` (ms below `max`), computed as the core does (schedule.rs, Jitter). */
function jitterOffset(name, tick, max) {
  const mask = (1n << 64n) - 1n
  let hash = 0xcbf29ce484222325n
  for (const byte of Buffer.from(name)) hash = ((hash ^ BigInt(byte)) * 0x100000001b3n) & mask
  let z = hash ^ ((BigInt.asUintN(64, BigInt(tick)) * 0x9e3779b97f4a7c15n) & mask)
  z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & mask
  z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & mask
  return Number((z ^ (z >> 31n)) % BigInt(max))
}

test('jitter on three replicas: each occurrence starts at its tick plus the same offset on every replica, below jitter, once', async () => {
  const name = uniqueKey('jitter')
  const jitter = 900
  await replicas.start(3, { message: { name, cron: '* * * * * *', options: { jitter } } })
  const from = Date.now() + 1000
  await replicas.next((e) => e.event === 'run' && e.tick >= from + 4000, 'five occurrences')
  await replicas.stop({ stop: true })
  const offsets = []
  for (let tick = from - (from % 1000) + 1000; tick <= from + 4000; tick += 1000) {
    const start = tick + jitterOffset(name, tick, jitter)
    offsets.push(start - tick)
    const runs = replicas.all((e) => e.event === 'start' && e.tick === tick)
    expect(runs).toHaveLength(1)
    // The replica that ran it and the two that found it taken each looked at it at its start, not before.
    expect(runs[0].at).toBeGreaterThanOrEqual(start)
    const skips = replicas.all((e) => e.event === 'skip' && e.tick === tick)
    expect(skips.map((e) => e.reason)).toEqual(['taken', 'taken'])
    for (const skip of skips) expect(skip.at).toBeGreaterThanOrEqual(start)
    const [record] = (await locker.history(name, { limit: 100 })).filter((r) => r.tick.getTime() === tick)
    expect(record).toMatchObject({ outcome: 'ok', attempt: 1, why: 'on-time' })
    expect(record.started.getTime()).toBeGreaterThanOrEqual(start)
  }
  expect(offsets.every((o) => o >= 0 && o < jitter)).toBe(true)
  expect(new Set(offsets).size).toBeGreaterThan(1)
})

test("with jitter, an attempt's start lag (diagnostics, metrics) counts from its start, not its tick", async () => {
  const channel = require('node:diagnostics_channel').channel('redis-snatch:attempt')
  const name = uniqueKey('jitter-lag')
  const jitter = 900
  const started = new Map()
  const messages = []
  const listen = (message) => message.schedule === name && messages.push(message)
  channel.subscribe(listen)
  const task = locker.schedule(name, '* * * * * *', ({ tick }) => void started.set(tick.getTime(), Date.now()), { jitter })
  await until(() => messages.length >= 3, 'three attempts')
  await task.stop()
  channel.unsubscribe(listen)
  for (const { tick, lagMs } of messages) {
    const due = tick.getTime() + jitterOffset(name, tick.getTime(), jitter)
    expect(lagMs).toBeGreaterThanOrEqual(0)
    expect(lagMs).toBeLessThanOrEqual(started.get(tick.getTime()) - due)
  }
})

test('timeout aborts the attempt, which counts as failed with RunTimeoutError', async () => {
  const name = uniqueKey('timeout')
  const { cron, tick } = tickIn(1500)
  let reason
  const task = locker.schedule(
    name,
    cron,
    async ({ signal }) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve))
      reason = signal.reason
    },
    { timeout: 300 },
  )
  const [err, info] = await new Promise((resolve) => task.once('error', (...args) => resolve(args)))
  await task.stop()
  expect(err).toBeInstanceOf(RunTimeoutError)
  expect(err.code).toBe('ERR_SNATCH_RUN_TIMEOUT')
  expect(reason).toBe(err)
  expect(info).toMatchObject({ tick: new Date(tick), attempt: 1, why: 'on-time' })
  const [record] = await recordsOf(name, tick, (r) => r.length > 0 && r[0].outcome !== 'running')
  expect(record).toMatchObject({ outcome: 'timeout', error: 'the attempt timed out after 300 ms' })
})

test('history stays bounded after 1,000 occurrences, and every key of a schedule has a ttl', async () => {
  const name = uniqueKey('bounded')
  const task = locker.schedule(name, '0 0 0 1 1 *', () => {}, { history: 10 })
  let runs = 0
  task.on('run', () => runs++)
  // Registered once it answers a manual run.
  await until(async () => !((await locker.trigger(name).catch((e) => e)) instanceof Error), 'the schedule to answer')
  for (let n = 1; n < 1000; n++) {
    const ran = new Promise((resolve) => task.once('run', resolve))
    await locker.trigger(name)
    await ran
  }
  await new Promise((resolve) => (runs >= 1000 ? resolve() : task.on('run', () => runs >= 1000 && resolve())))
  await task.stop()
  const url = process.env.REDIS_URL
  expect(await redisCommand(url, 'ZCARD', `{snatch:${name}}:history`)).toBe(10)
  expect(await redisCommand(url, 'HLEN', `{snatch:${name}}:records`)).toBe(10)
  expect(await locker.history(name, { limit: 100 })).toHaveLength(10)
  const keys = await redisCommand(url, 'KEYS', `*${name}*`)
  expect(keys.length).toBeGreaterThan(0)
  const ttls = await Promise.all(keys.map((key) => redisCommand(url, 'PTTL', key)))
  expect(ttls.filter((ttl) => ttl < 0)).toEqual([])
})

test("a replica's close() takes its registration away before it resolves: schedules() from another process lists no replica of it, orphaned", async () => {
  const name = uniqueKey('leaves')
  const [first] = await replicas.start(2, { message: { name, cron: '0 0 1 1 *' } })
  const listed = async () => (await locker.schedules()).find((s) => s.name === name)
  // Registered by both (each registers at once when it starts; 'ready' comes just before).
  await until(async () => (await listed())?.replicas.length === 2, 'both replicas to register')
  // One closes (its locker's close() resolves before it reports leaving): the other is still registered.
  const exited = new Promise((resolve) => replicas.children.get(first).once('exit', resolve))
  replicas.send(first, { stop: true })
  await exited
  expect((await listed()).replicas).toHaveLength(1)
  expect((await listed()).health).toBe('ok')
  await replicas.stop({ stop: true })
  expect(await listed()).toMatchObject({ replicas: [], health: 'orphaned' })
})
