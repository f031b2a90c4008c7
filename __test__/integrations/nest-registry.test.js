'use strict'
// NestJS code written for @nestjs/schedule, adopting redis-snatch/nest (support/workers/nest-registry.ts, three
// processes): a @Cron method stays reachable through SchedulerRegistry (getCronJob, getCronJobs), its job's stop() and
// start() are this replica's part only (the fleet goes on), and a CronJob added at run time, which would run on every
// replica, is refused with an error naming the replacement.

const path = require('node:path')
const { createLocker } = require('../..')
const { Replicas } = require('../support/replicas')
const { uniqueKey, until } = require('../support/util')

jest.setTimeout(60_000)

const REPLICA = path.join(__dirname, '..', 'support', 'workers', 'nest-registry.ts')
const TS = ['-r', path.join(__dirname, '..', 'support', 'ts-register.js')]

let replicas
beforeEach(() => {
  replicas = new Replicas(REPLICA, { execArgv: TS })
})
afterEach(() => replicas.killAll())

let ops = 0
/** Asks replica `pid` for `op`; resolves its answer. */
function ask(pid, op) {
  const id = ++ops
  replicas.send(pid, { op, id })
  return replicas.next((e) => e.event === 'answer' && e.id === id, `${op} answered`)
}

/** The live replicas of schedule 'notifications', as the fleet sees them. */
async function registered(locker) {
  const [info] = (await locker.schedules()).filter((s) => s.name === 'notifications')
  return info
}

test('a @Cron method is reachable through SchedulerRegistry, and its stop()/start() are this replica\'s part only', async () => {
  const prefix = `${uniqueKey('nest-registry')}:`
  const locker = createLocker({ url: process.env.REDIS_URL, prefix })
  const pids = await replicas.start(3, { env: { SNATCH_NEST: JSON.stringify({ options: { url: process.env.REDIS_URL, prefix } }) } })
  for (const pid of pids) {
    const { value } = await ask(pid, 'get')
    expect(value).toMatchObject({ running: true, source: '* * * * * *' })
    expect(value.names).toContain('notifications')
  }
  await until(async () => (await registered(locker))?.replicas.length === 3, 'three replicas registered')

  // A pod's shutdown hook stops its part: the others go on, the schedule is not suspended.
  const [leaving, ...staying] = pids
  expect((await ask(leaving, 'stop')).value).toEqual({ running: false })
  const stoppedAt = Date.now()
  await until(async () => (await registered(locker)).replicas.length === 2, 'the stopped replica gone from the schedule')
  expect((await registered(locker)).suspended).toBe(false)
  const after = Math.ceil((stoppedAt + 1) / 1000) * 1000
  await replicas.next((e) => e.event === 'tick' && e.tick >= after + 3000, 'three occurrences after the stop')
  const ticks = replicas.all((e) => e.event === 'tick' && e.tick >= after && e.tick <= after + 3000)
  expect(ticks.map((e) => e.tick).sort()).toEqual([0, 1000, 2000, 3000].map((ms) => after + ms))
  expect(ticks.every((e) => staying.includes(e.pid))).toBe(true)
  const { value } = await ask(staying[0], 'get')
  expect(value.running).toBe(true)

  // Started again, it takes part again.
  expect((await ask(leaving, 'start')).value).toEqual({ running: true })
  await until(async () => (await registered(locker)).replicas.length === 3, 'the replica back in the schedule')

  await replicas.stop({ close: true })
  await locker.close()
})

test('a CronJob added at run time is refused with an error naming the replacement, and does not run', async () => {
  const prefix = `${uniqueKey('nest-registry')}:`
  const [pid] = await replicas.start(1, {
    env: { SNATCH_NEST: JSON.stringify({ options: { url: process.env.REDIS_URL, prefix }, expr: '0 0 1 1 *' }) },
  })
  const refused = await ask(pid, 'add')
  expect(refused.code).toBe('ERR_SNATCH_INVALID_ARG')
  expect(refused.message).toMatch(/addCronJob\('digest:user-42'\) refused: .*every replica/)
  expect(refused.message).toMatch(/@SnatchHandler.*locker\.upsertSchedule/)
  const { value } = await ask(pid, 'get')
  expect(value.names).toEqual(['notifications'])
  expect(replicas.all((e) => e.event === 'per-replica')).toEqual([])
  await replicas.stop({ close: true })
})
