'use strict'
// Stored schedules across processes against a real Redis: three runner processes of a handler and this process, which
// runs none, upserting, changing and removing schedules; each occurrence once with rising fences; a one-off `at` whose
// runners were all down at its time runs once, late; SIGKILL of a runner mid-occurrence taken over; a runner stopped
// between a claim and the call of its fn does not call it once resumed; bad input refused with nothing stored; one
// namespace with code schedules; memory:// in one process; Redlock refused.

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { createLocker } = require('../..')
const { Replicas } = require('../support/replicas')
const { uniqueKey, sleep, until } = require('../support/util')

jest.setTimeout(90_000)

let locker
beforeAll(() => {
  locker = createLocker({ url: process.env.REDIS_URL })
})
afterAll(() => locker.close())

let replicas
beforeEach(() => {
  replicas = new Replicas(path.join(__dirname, '..', 'support', 'workers', 'stored-runner.js'))
})
afterEach(() => replicas.killAll())

/** The occurrences started, by stored schedule id and tick: how many times each. */
function counts(events) {
  const seen = new Map()
  for (const e of events) seen.set(`${e.id}@${e.tick}`, (seen.get(`${e.id}@${e.tick}`) ?? 0) + 1)
  return seen
}

test('three runner processes run each occurrence once while another process upserts, changes and removes', async () => {
  const handler = uniqueKey('digest')
  const ids = [0, 1, 2, 3].map((n) => `${handler}:user-${n}`)
  for (const [n, id] of ids.entries()) {
    const info = await locker.upsertSchedule(id, { handler, every: 1000, data: { user: n } })
    expect(info).toMatchObject({ id, handler, every: 1000, data: { user: n }, health: 'orphaned', runs: 0 })
    expect(info.next).toBeInstanceOf(Date)
  }
  await replicas.start(3, { message: { handler } })
  await until(async () => (await locker.getSchedule(ids[0])).runs >= 2, 'two runs of the first schedule', 20_000)
  const changed = await locker.upsertSchedule(ids[1], { handler, every: 2000, data: 'changed' })
  expect(changed.data).toBe('changed')
  expect(await locker.removeSchedule(ids[2])).toBe(true)
  const removedAt = Date.now()
  expect(await locker.removeSchedule(ids[2])).toBe(false)
  expect(await locker.getSchedule(ids[2])).toBeNull()
  await until(async () => (await locker.getSchedule(ids[0])).runs >= 6, 'six runs of the first schedule', 30_000)
  await replicas.stop({ stop: true })

  const starts = replicas.all((e) => e.event === 'start')
  for (const [occurrence, n] of counts(starts)) expect([occurrence, n]).toEqual([occurrence, 1])
  expect(new Set(starts.map((e) => e.pid)).size).toBeGreaterThan(1)
  expect(starts.filter((e) => e.id === ids[2] && e.at > removedAt)).toEqual([])
  expect(starts.filter((e) => e.id === ids[0]).every((e) => e.data.user === 0)).toBe(true)
  const after = starts.filter((e) => e.id === ids[1] && e.data === 'changed').map((e) => e.tick)
  expect(after.length).toBeGreaterThan(0)
  for (let i = 1; i < after.length; i++) expect(after[i] - after[i - 1]).toBeGreaterThanOrEqual(2000)
  for (const id of [ids[0], ids[3]]) {
    const records = (await locker.history(id, { limit: 100 })).reverse()
    expect(records.length).toBeGreaterThan(2)
    for (let i = 1; i < records.length; i++) expect(records[i].fence).toBeGreaterThan(records[i - 1].fence)
    // Every attempt ran ok, but the stop may close a runner between its claim of the newest occurrence and the call of
    // its fn: that attempt is recorded interrupted (and handed over, perhaps to a runner closing too).
    const ok = records.filter((r) => r.outcome === 'ok')
    expect(ok.length).toBeLessThanOrEqual(10)
    const newest = records.at(-1).tick.getTime()
    const cut = records.filter((r) => r.outcome !== 'ok').map((r) => [r.outcome, r.tick.getTime()])
    expect(cut).toEqual(cut.map(() => ['interrupted', newest]))
  }
  const page = await locker.listSchedules({ handler, limit: 2 })
  expect(page.schedules).toHaveLength(2)
  expect(typeof page.cursor).toBe('string')
  const rest = await locker.listSchedules({ handler, limit: 10, cursor: page.cursor })
  expect([...page.schedules, ...rest.schedules].map((s) => s.id).sort()).toEqual([ids[0], ids[1], ids[3]])
  for (const id of [ids[0], ids[1], ids[3]]) await locker.removeSchedule(id)
})

test('a one-off at whose runners were all down at its time runs once, late, after they restart', async () => {
  const handler = uniqueKey('cleanup')
  const id = `${handler}:once`
  const at = new Date(Date.now() + 3000)
  await locker.upsertSchedule(id, { handler, at, data: { table: 'sessions' } })
  const pids = await replicas.start(3, { message: { handler } })
  for (const pid of pids) await replicas.kill(pid)
  // Time is what is tested: the one-off's time and its on-time window (10 s) pass while every runner is down.
  await sleep(at.getTime() + 11_000 - Date.now())
  await replicas.start(2, { message: { handler } })
  const run = await replicas.next((e) => e.event === 'run' && e.id === id, 'the late run')
  expect(run).toMatchObject({ tick: at.getTime(), why: 'late', attempt: 1 })
  await until(async () => (await locker.getSchedule(id)).finished !== null, 'the schedule finished', 10_000)
  const info = await locker.getSchedule(id)
  expect(info).toMatchObject({ next: null, runs: 1, data: { table: 'sessions' } })
  expect(info.last).toMatchObject({ outcome: 'ok', why: 'late' })
  expect(replicas.all((e) => e.event === 'start' && e.id === id)).toHaveLength(1)
})

test('SIGKILL of the runner mid-occurrence: another runner takes it over with a higher fence, once', async () => {
  const handler = uniqueKey('crash')
  const id = `${handler}:job`
  await replicas.start(1, { message: { handler, hang: true } })
  await locker.upsertSchedule(id, { handler, at: Date.now() + 500, ttl: 1000 })
  const hung = await replicas.next((e) => e.event === 'start' && e.id === id, 'the first attempt')
  await replicas.kill(hung.pid)
  await replicas.start(2, { message: { handler } })
  const retry = await replicas.next((e) => e.event === 'run' && e.id === id, 'the takeover')
  expect(retry).toMatchObject({ attempt: 2, why: 'retry' })
  const records = await locker.history(id)
  expect(records.map((r) => [r.attempt, r.outcome])).toEqual([
    [2, 'ok'],
    [1, 'crashed'],
  ])
  expect(records[0].fence).toBeGreaterThan(records[1].fence)
  expect(replicas.all((e) => e.event === 'start' && e.id === id && e.attempt === 2)).toHaveLength(1)
})

test('a runner stopped between the claim of an occurrence and the call of its fn does not call it once resumed', async () => {
  const handler = uniqueKey('stood-still')
  const id = `${handler}:job`
  const resume = path.join(os.tmpdir(), `${handler}.resume`)
  const [still] = await replicas.start(1, { message: { handler } })
  replicas.send(still, { block: resume })
  await replicas.next((e) => e.event === 'blocked', 'the runner to block its loop')
  await locker.upsertSchedule(id, { handler, at: Date.now() + 200, ttl: 1000 })
  // Claimed and recorded running by the blocked runner: its fn waits for its loop, and its process is stopped.
  const running = async () => (await locker.history(id)).some((r) => r.attempt === 1 && r.outcome === 'running')
  await until(running, 'the first attempt claimed', 10_000)
  process.kill(still, 'SIGSTOP')
  try {
    // Its claim lapses: another runner takes the occurrence over and runs it.
    await replicas.start(1, { message: { handler } })
    const retry = await replicas.next((e) => e.event === 'run' && e.id === id, 'the takeover')
    expect(retry).toMatchObject({ attempt: 2, why: 'retry' })
  } finally {
    fs.writeFileSync(resume, '')
    process.kill(still, 'SIGCONT')
  }
  // Resumed, its loop turns: the fn of the attempt whose lease lapsed is not called, then or later.
  await replicas.stop({ stop: true })
  fs.rmSync(resume)
  expect(replicas.all((e) => e.event === 'start').map((e) => [e.pid === still, e.attempt])).toEqual([[false, 2]])
  const records = await locker.history(id)
  expect(records.map((r) => [r.attempt, r.outcome])).toEqual([
    [2, 'ok'],
    [1, 'crashed'],
  ])
})

test('suspend, resume and trigger steer a stored schedule from a process that runs none', async () => {
  const handler = uniqueKey('steer')
  const id = `${handler}:s`
  await locker.upsertSchedule(id, { handler, cron: '0 0 1 1 *', timezone: 'Europe/Paris' })
  await expect(locker.trigger(id)).rejects.toMatchObject({ code: 'ERR_SNATCH_NO_REPLICA' })
  await replicas.start(1, { message: { handler } })
  await until(async () => (await locker.getSchedule(id)).health === 'ok', 'a runner', 10_000)
  const { tick } = await locker.trigger(id)
  const manual = await replicas.next((e) => e.event === 'run' && e.id === id, 'the manual run')
  expect(manual).toMatchObject({ why: 'manual', tick: tick.getTime() })
  await locker.suspend(id)
  expect((await locker.getSchedule(id)).suspended).toBe(true)
  await locker.resume(id)
  expect((await locker.getSchedule(id)).suspended).toBe(false)
  await locker.removeSchedule(id)
})

test('bad input is refused with a coded error and nothing stored', async () => {
  const id = uniqueKey('bad')
  const cyclic = {}
  cyclic.self = cyclic
  const bad = [
    [id, { handler: 'h' }, TypeError],
    [id, { handler: 'h', cron: '* * * * *', every: 5000 }, TypeError],
    [id, { handler: 'h', every: 999 }, RangeError],
    [id, { handler: 'h', at: new Date(Date.now() - 3_600_000) }, RangeError],
    [id, { handler: 'h', every: 5000, data: 'x'.repeat(9000) }, RangeError],
    [id, { handler: 'h', every: 5000, data: cyclic }, TypeError],
    [id, { handler: 'h', every: 5000, data: 10n }, TypeError],
    [id, { handler: 'h', every: 5000, data: () => 1 }, TypeError],
    [id, { handler: 'h', every: 5000, colour: 'red' }, TypeError],
    ['', { handler: 'h', every: 5000 }, TypeError],
    ['x'.repeat(600), { handler: 'h', every: 5000 }, TypeError],
  ]
  for (const [target, spec, Class] of bad) {
    const error = await locker.upsertSchedule(target, spec).catch((err) => err)
    expect(error).toBeInstanceOf(Class)
    expect(error.code).toBe('ERR_SNATCH_INVALID_ARG')
  }
  expect(await locker.getSchedule(id)).toBeNull()
})

test('ids and code schedule names are one namespace, each refusal said when it is detected', async () => {
  const name = uniqueKey('code')
  const task = locker.schedule(name, '0 0 1 1 *', () => {})
  // Refused at once: this locker runs a code schedule of that name.
  await expect(locker.upsertSchedule(name, { handler: 'h', every: 5000 })).rejects.toMatchObject({
    code: 'ERR_SNATCH_INVALID_ARG',
  })
  await task.stop()
  const id = uniqueKey('stored')
  await locker.upsertSchedule(id, { handler: 'h', every: 60_000 })
  const other = createLocker({ url: process.env.REDIS_URL })
  try {
    const code = other.schedule(id, '0 0 1 1 *', () => {})
    const [error] = await new Promise((resolve) => code.once('error', (...args) => resolve(args)))
    expect(error.code).toBe('ERR_SNATCH_INVALID_ARG')
    expect(error.message).toMatch(/stored schedule/)
  } finally {
    await other.close()
    await locker.removeSchedule(id)
  }
})

test('memory:// runs stored schedules in one process; Redlock is refused with a clear error', async () => {
  const memory = createLocker({ url: `memory://${uniqueKey('mem')}` })
  try {
    const seen = []
    const handler = memory.handle('clean', ({ id, data, fence }) => seen.push({ id, data, fence }))
    await memory.upsertSchedule('once', { handler: 'clean', at: Date.now() + 200, data: [1] })
    await until(() => seen.length > 0, 'the run', 10_000)
    expect(seen).toEqual([{ id: 'once', data: [1], fence: expect.any(BigInt) }])
    await handler.stop()
  } finally {
    await memory.close()
  }
  const url = process.env.REDIS_URL
  const redlock = createLocker({ urls: [url, url.replace(/\/?$/, '/1'), url.replace(/\/?$/, '/2')] })
  try {
    await expect(redlock.upsertSchedule('x', { handler: 'h', every: 5000 })).rejects.toThrow(/Redlock/)
    expect(() => redlock.handle('h', () => {})).toThrow(/Redlock/)
  } finally {
    await redlock.close()
  }
})
