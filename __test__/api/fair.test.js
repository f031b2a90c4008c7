'use strict'
// Fair waiting across processes: waiters served in the order they came, and ones that gave up or died not holding the
// others up beyond their place's lease. Each deployment: support/every-method.js; one process, the core's
// crates/core/tests/fair.rs.

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker } = require('../..')
const { redisCommand, startRedis } = require('../support/redis-server')
const { until } = require('../support/every-method')
const { uniqueKey } = require('../support/util')

const url = () => process.env.REDIS_URL

/** Forks a replica of fair waiters (support/workers/fair-waiter.js), resolved once it listens. */
function replica() {
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'fair-waiter.js'))
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child))
    child.once('error', reject)
  })
}

/** The reports of `children`'s waiters, by waiter number, as they come. */
function reports(children) {
  const got = new Map()
  for (const child of children) child.on('message', (report) => got.set(report.n, report))
  return got
}

/** How many fair waiters queue for `key`. */
const queued = (key) => redisCommand(url(), 'ZCARD', `{snatch:${key}}:queue`).then(Number)

/** Starts waiter `n` of `key` on `child`, waiting up to `wait` ms, and resolves once `length` waiters queue. */
async function start(child, key, n, wait, length) {
  child.send({ url: url(), key, n, wait })
  await until(async () => (await queued(key)) === length, `waiter ${n} to queue`)
}

/** The waiters of `got` that held the lock, in the order they held it (their fences rise with it). */
function heldOrder(got) {
  return [...got.values()]
    .filter((r) => r.fence !== undefined)
    .sort((a, b) => (BigInt(a.fence) < BigInt(b.fence) ? -1 : 1))
    .map((r) => r.n)
}

let children = []
let holder
beforeEach(async () => {
  children = await Promise.all([0, 1, 2, 3].map(replica))
  holder = createLocker({ url: url() })
})
afterEach(async () => {
  for (const child of children) child.kill('SIGKILL')
  await holder.close()
})

test('20 fair waiters started one after another across 4 processes get the lock in the order they came', async () => {
  const key = uniqueKey('fair-order')
  const held = await holder.lock(key, { ttl: 30_000 })
  const got = reports(children)
  for (let n = 0; n < 20; n++) await start(children[n % 4], key, n, 60_000, n + 1)
  expect(await held.release()).toBe(true)
  await until(async () => got.size === 20, 'every waiter to hold the lock', 60_000)
  expect(heldOrder(got)).toEqual([...Array(20).keys()])
  expect(await queued(key)).toBe(0)
})

test('a waiter that timed out leaves the queue at once, and a SIGKILLed one holds the rest up only until its place lapses', async () => {
  const key = uniqueKey('fair-faults')
  const held = await holder.lock(key, { ttl: 30_000 })
  const got = reports(children)
  // Waiter 5 gives up after 5 s (the 12 queue well before); child 2's waiters (2, 6, 10) die with it, while queued.
  for (let n = 0; n < 12; n++) await start(children[n % 4], key, n, n === 5 ? 5_000 : 20_000, n + 1)
  await until(async () => got.has(5), 'waiter 5 to time out')
  expect(got.get(5)).toEqual({ n: 5, error: 'ERR_SNATCH_TIMEOUT' })
  expect(await queued(key)).toBe(11)
  children[2].kill('SIGKILL')
  expect(await held.release()).toBe(true)
  const survivors = [0, 1, 3, 4, 7, 8, 9, 11]
  // Within their 20 s of waiting: the dead waiters' places lapse (2 s after their last renewal), not block the rest.
  await until(async () => survivors.every((n) => got.has(n)), 'the survivors to hold the lock', 30_000)
  expect(survivors.map((n) => got.get(n).error)).toEqual(survivors.map(() => undefined))
  expect(heldOrder(got)).toEqual(survivors)
})

test('Redlock refuses fair waiting with a TypeError, before any attempt', async () => {
  const servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  const redlock = createLocker({ urls: servers.map((s) => s.url) })
  try {
    for (const call of [() => redlock.lock('k', { fair: true, wait: 100 }), () => redlock.semaphore('s', 2).acquire({ fair: true })]) {
      const err = await call().catch((e) => e)
      expect(err).toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG', name: 'TypeError', message: expect.stringContaining('not Redlock') })
    }
    expect(Number(await redisCommand(servers[0].url, 'EXISTS', 'snatch:k'))).toBe(0)
  } finally {
    await redlock.close()
    await Promise.all(servers.map((s) => s.stop()))
  }
})
