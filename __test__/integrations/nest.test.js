'use strict'
// NestJS (11, CommonJS) with redis-snatch/nest, as separate processes of one application
// (support/workers/nest-replica.ts): @Cron once across replicas, a dead runner's occurrence taken over, retries,
// @WithLock / @Snatch exclusion per argument, a lost lease aborting the method's signal, and shutdown under
// enableShutdownHooks.

const { execFile } = require('node:child_process')
const path = require('node:path')
const { promisify } = require('node:util')
const { createLocker } = require('../..')
const { Replicas } = require('../support/replicas')
const { uniqueKey, until } = require('../support/util')

jest.setTimeout(60_000)

const REPLICA = path.join(__dirname, '..', 'support', 'workers', 'nest-replica.ts')
const TS = ['-r', path.join(__dirname, '..', 'support', 'ts-register.js')]

let replicas
beforeEach(() => {
  replicas = new Replicas(REPLICA, { execArgv: TS })
})
afterEach(() => replicas.killAll())

/** A prefix of this test's own, and a Locker on it (to look at what the replicas did). */
function fleet() {
  const prefix = `${uniqueKey('nest')}:`
  return { prefix, locker: createLocker({ url: process.env.REDIS_URL, prefix }) }
}

/** Starts `count` replicas of the Nest application with `config` (nest-replica.ts); resolves their pids. */
function startApps(count, config) {
  return replicas.start(count, { env: { SNATCH_NEST: JSON.stringify(config) } })
}

/** Asks replica `pid` to call `Orders[call](...args)`; resolves its `result` or `error` event. */
let calls = 0
function call(pid, method, ...args) {
  const id = ++calls
  replicas.send(pid, { call: method, args, id })
  return replicas.next((e) => (e.event === 'result' || e.event === 'error') && e.id === id, `${method} to settle`)
}

test('@Cron runs each occurrence on exactly one of three replicas, recorded under its name', async () => {
  const { prefix, locker } = fleet()
  const name = 'report:every-2s'
  const pids = await startApps(3, { options: { url: process.env.REDIS_URL, prefix }, cron: { name, expr: '*/2 * * * * *', mode: 'quick' } })
  const from = Date.now()
  expect(replicas.all((e) => e.event === 'ready').every((e) => e.sameLocker)).toBe(true)
  // Four occurrences after every replica is up, and the one after them (so that a late duplicate would be seen).
  const first = await replicas.next((e) => e.event === 'end' && e.tick > from, 'a first occurrence')
  await replicas.next((e) => e.event === 'end' && e.tick >= first.tick + 8000, 'the fifth occurrence')
  const ticks = [0, 2000, 4000, 6000].map((ms) => first.tick + ms)
  for (const tick of ticks) {
    expect(replicas.all((e) => e.event === 'start' && e.tick === tick)).toHaveLength(1)
  }
  expect(new Set(replicas.all((e) => e.event === 'start' && ticks.includes(e.tick)).map((e) => e.pid)).size).toBeGreaterThanOrEqual(1)

  const records = await locker.history(name)
  for (const tick of ticks) {
    expect(records.filter((r) => r.tick.getTime() === tick)).toEqual([expect.objectContaining({ attempt: 1, outcome: 'ok' })])
  }
  const [info] = (await locker.schedules()).filter((s) => s.name === name)
  expect(info).toMatchObject({ name, cron: '*/2 * * * * *' })
  expect(info.replicas).toHaveLength(3)

  const cli = await promisify(execFile)(
    process.execPath,
    [path.join(__dirname, '..', '..', 'bin', 'redis-snatch.js'), 'schedules', '--json', '--url', process.env.REDIS_URL, '--prefix', prefix],
  )
  expect(JSON.parse(cli.stdout).map((s) => s.name)).toEqual([name])
  await replicas.stop({ close: true })
  expect(pids).toHaveLength(3)
  await locker.close()
})

/**
 * Schedule `name`'s records of occurrence `tick` once none is running: a method's end is told before its attempt's
 * record is written.
 */
async function settledRecords(locker, name, tick) {
  let records
  const settled = async () => {
    records = (await locker.history(name)).filter((r) => r.tick.getTime() === tick)
    return !records.some((r) => r.outcome === 'running')
  }
  await until(settled, `the records of ${name} at ${tick} to settle`)
  return records
}

test('a replica SIGKILLed while its @Cron method runs: the occurrence runs again on another, with a higher fence', async () => {
  const { prefix, locker } = fleet()
  // One occurrence (a daily cron, its tick in 4 s), so that no later one keeps the other replica busy.
  const tick = new Date(Math.ceil((Date.now() + 4000) / 1000) * 1000)
  const expr = `${tick.getUTCSeconds()} ${tick.getUTCMinutes()} ${tick.getUTCHours()} * * *`
  const cron = { name: 'hangs', expr, timeZone: 'UTC', mode: 'hang-first', schedule: { ttl: 1500 } }
  await startApps(2, { options: { url: process.env.REDIS_URL, prefix }, cron })
  const first = await replicas.next((e) => e.event === 'start' && e.attempt === 1, 'a first attempt')
  expect(first.tick).toBe(tick.getTime())
  await replicas.kill(first.pid)
  const second = await replicas.next((e) => e.event === 'end' && e.tick === first.tick, 'the attempt that takes over')
  expect(second.pid).not.toBe(first.pid)
  expect(second.attempt).toBe(2)
  expect(BigInt(second.fence)).toBeGreaterThan(BigInt(first.fence))
  const records = await settledRecords(locker, 'hangs', first.tick)
  expect(records.map((r) => r.outcome).sort()).toEqual(['crashed', 'ok'])
  await locker.close()
})

test('a @Cron method that throws is retried per @SnatchSchedule({ retries })', async () => {
  const { prefix, locker } = fleet()
  const cron = { name: 'flaky', expr: '*/2 * * * * *', mode: 'fail-first', schedule: { retries: 1, retryDelay: 200 } }
  await startApps(2, { options: { url: process.env.REDIS_URL, prefix }, cron })
  const retry = await replicas.next((e) => e.event === 'end' && e.attempt === 2, 'a retried attempt')
  expect(retry.why).toBe('retry')
  const records = await settledRecords(locker, 'flaky', retry.tick)
  expect(records.map((r) => [r.attempt, r.outcome]).sort()).toEqual([
    [1, 'failed'],
    [2, 'ok'],
  ])
  expect(records.find((r) => r.attempt === 1).error).toBe('the first attempt fails')
  await locker.close()
})

test('@WithLock excludes calls with the same argument across processes, not calls with another', async () => {
  const { prefix, locker } = fleet()
  const [a, b] = await startApps(2, { options: { url: process.env.REDIS_URL, prefix } })
  const runs = await Promise.all([
    call(a, 'charge', 'A', 500),
    call(b, 'charge', 'A', 500),
    call(a, 'charge', 'A', 500),
    call(b, 'charge', 'B', 500),
  ])
  expect(runs.map((r) => r.event)).toEqual(['result', 'result', 'result', 'result'])
  // The calls on 'A' ran one after another, each with a higher fence; the call on 'B' ran beside one of them.
  const onA = runs.slice(0, 3).map((r) => r.value).sort((x, y) => x.entered - y.entered)
  for (let i = 1; i < onA.length; i++) {
    expect(onA[i].entered).toBeGreaterThanOrEqual(onA[i - 1].left)
    expect(BigInt(onA[i].fence)).toBeGreaterThan(BigInt(onA[i - 1].fence))
  }
  const onB = runs[3].value
  expect(onA.some((x) => onB.entered < x.left && x.entered < onB.left)).toBe(true)
  await locker.close()
})

test('@WithLock names its lock by the key function; @Snatch runs where it wins and resolves undefined elsewhere', async () => {
  const { prefix, locker } = fleet()
  const [a, b] = await startApps(2, { options: { url: process.env.REDIS_URL, prefix } })
  const charging = call(a, 'charge', 'order-7', 1000)
  await replicas.next((e) => e.event === 'entered' && e.key === 'orders:order-7', 'the charge to hold its lock')
  expect(await locker.inspect('orders:order-7')).toMatchObject({ holder: expect.stringMatching(`:${a}$`) })
  expect((await charging).event).toBe('result')

  // The winner exports until told; the other resolves meanwhile (two winners, the bug, are let through to fail).
  const exporting = [call(a, 'exportRegion', 'eu', null), call(b, 'exportRegion', 'eu', null)]
  let settled = 0
  for (const exported of exporting) exported.then(() => settled++)
  await until(() => settled >= 1, 'the call that loses to resolve', 20_000).catch(() => {})
  for (const pid of [a, b]) replicas.send(pid, { finish: true })
  const values = (await Promise.all(exporting)).map((r) => r.value)
  expect(values.filter((v) => v === undefined)).toHaveLength(1)
  expect(values.filter((v) => typeof v === 'string' && v.startsWith('eu exported by '))).toHaveLength(1)
  await locker.close()
})

test("a lost lease aborts the @WithLock method's signal (currentRun().signal) with LockLostError", async () => {
  const { prefix, locker } = fleet()
  const [a] = await startApps(1, { options: { url: process.env.REDIS_URL, prefix } })
  const key = 'lease:1'
  const settled = call(a, 'untilLost', key)
  await replicas.next((e) => e.event === 'holding' && e.key === key, 'the method to hold its lock')
  expect(await locker.forceRelease(key)).toBe(true)
  // The method resolves its signal's reason's code; the call then rejects LockLostError (its lease was lost).
  expect(await settled).toMatchObject({ event: 'error', code: 'ERR_SNATCH_LOCK_LOST' })
  await locker.close()
})

test('SIGTERM with enableShutdownHooks while a @Cron method runs: it finishes, its lock is released, the process exits', async () => {
  const { prefix, locker } = fleet()
  const cron = { name: 'slow', expr: '*/2 * * * * *', mode: 'slow' }
  const [pid] = await startApps(1, { options: { url: process.env.REDIS_URL, prefix }, cron, shutdownHooks: true })
  const start = await replicas.next((e) => e.event === 'start', 'an attempt to start')
  const exit = await replicas.kill(pid, 'SIGTERM')
  expect(replicas.all((e) => e.event === 'end' && e.tick === start.tick)).toHaveLength(1)
  expect(exit).toEqual({ code: null, signal: 'SIGTERM' })
  expect(await locker.inspect('slow')).toBeNull()
  const held = await locker.locks()
  expect(held.filter((lock) => lock.holder?.endsWith(`:${pid}`))).toEqual([])
  const [record] = (await locker.history('slow')).filter((r) => r.tick.getTime() === start.tick)
  expect(record.outcome).toBe('ok')
  await locker.close()
})
