'use strict'
// Bounded Redis memory: every key a locker writes has a ttl, fence counters expire fenceTtl after the last
// acquisition, and fences keep rising across a counter's expiry (a new counter starts from the server's clock), on
// every path: the direct connection, the main connection, waiting calls, schedules and Redlock.

const { createLocker } = require('../..')
const { startRedis, redisCommand } = require('../support/redis-server')
const { waitFor } = require('../support/deployments')
const { uniqueKey } = require('../support/util')

const url = () => process.env.REDIS_URL
const lockers = []

/** A locker with `options` on the suite's server, closed after the suite. */
function locker(options) {
  const made = createLocker({ url: url(), ...options })
  lockers.push(made)
  return made
}

afterAll(() => Promise.all(lockers.map((l) => l.close())))

/** Keys matching `pattern` on `server`, and how many of them have no ttl (one script, run by the server). */
async function keysWithoutTtl(server, pattern) {
  const script =
    "local keys = redis.call('KEYS', ARGV[1]) local none = 0 " +
    "for _, k in ipairs(keys) do if redis.call('PTTL', k) == -1 then none = none + 1 end end return {#keys, none}"
  const [count, none] = await redisCommand(server, 'EVAL', script, '0', pattern)
  return { count, none }
}

/** Every key written under `prefix`: the lock keys, and `{prefix…` counters. */
async function keysOf(server, prefix) {
  const [locks, counters] = await Promise.all([`${prefix}*`, `{${prefix}*`].map((p) => keysWithoutTtl(server, p)))
  return { count: locks.count + counters.count, none: locks.none + counters.none }
}

test('thousands of distinct keys through snatchTask, tryLock and lock with wait: no key is left without a ttl', async () => {
  const prefix = `${uniqueKey('bounded')}:`
  const l = locker({ prefix })
  const keys = (name) => Array.from({ length: 1000 }, (_, i) => `${name}:${i}`)
  for (const key of keys('snatch')) expect((await l.snatchTask(key, () => 1)).ran).toBe(true)
  await Promise.all(keys('try').map(async (key) => expect(await (await l.tryLock(key)).release()).toBe(true)))
  await Promise.all(keys('wait').map(async (key) => expect(await (await l.lock(key, { wait: 1000 })).release()).toBe(true)))
  // And a lock a waiter was woken for (the holder's token marked with '*', which keeps its ttl).
  const held = await l.lock('waited', { ttl: 10_000 })
  const waiter = l.withLock('waited', () => 'woken', { wait: 5000 })
  await waitFor('the waiter to mark the lock', async () =>
    (await redisCommand(url(), 'GET', `${prefix}waited`))?.endsWith('*'),
  )
  const marked = await keysOf(url(), prefix)
  expect(await held.release()).toBe(true)
  expect(await waiter).toBe('woken')
  const { count, none } = await keysOf(url(), prefix)
  expect(count).toBe(1) // the locks were released: only the prefix's fence counter is left
  expect(none).toBe(0)
  expect(marked.none).toBe(0)
  const ttl = Number(await redisCommand(url(), 'PTTL', `{${prefix}}:fence`))
  expect(ttl).toBeGreaterThan(7 * 24 * 3600 * 1000 - 60_000) // the default fenceTtl: 7 days
})

test('a schedule\'s claims and run lock leave nothing without a ttl', async () => {
  const prefix = `${uniqueKey('bounded-cron')}:`
  const l = locker({ prefix, fenceTtl: 60_000 })
  let runs = 0
  const task = l.schedule('job', '* * * * * *', () => runs++)
  await waitFor('two occurrences', async () => runs >= 2)
  await task.stop()
  const { count, none } = await keysOf(url(), prefix)
  expect(count).toBeGreaterThanOrEqual(2) // the last claim, kept for a period, and the counter
  expect(none).toBe(0)
})

test('with a small fenceTtl, nothing of the keys is left once it has passed', async () => {
  const prefix = `${uniqueKey('bounded-expiry')}:`
  const l = locker({ prefix, fenceTtl: 300 })
  await Promise.all(Array.from({ length: 200 }, (_, i) => l.snatchTask(`k${i}`, () => i)))
  await Promise.all(Array.from({ length: 200 }, async (_, i) => (await l.lock(`w${i}`, { wait: 100 })).release()))
  expect((await keysOf(url(), prefix)).count).toBe(1) // the locks were released: the prefix's fence counter
  await waitFor('every key of the prefix to expire', async () => (await keysOf(url(), prefix)).count === 0, 10_000)
})

/**
 * Acquires a key of `prefix` with `acquire` `times` times, each after the prefix's counter expired (fenceTtl 50 ms):
 * the fences, which must rise.
 */
async function acrossExpiries(server, prefix, acquire, times = 3) {
  const fences = []
  for (let i = 0; i < times; i++) {
    fences.push(await acquire())
    await waitFor('the counter to expire', async () => (await redisCommand(server, 'EXISTS', `{${prefix}}:fence`)) === 0)
  }
  return fences
}

test.each([
  ['snatchTask (the direct connection)', (l, key) => l.snatchTask(key, ({ fence }) => fence).then((r) => r.value)],
  ['tryLock and release', async (l, key) => { const lock = await l.tryLock(key); await lock.release(); return lock.fence }],
  ['withLock with wait (the main connection)', (l, key) => l.withLock(key, ({ fence }) => fence, { wait: 1000 })],
])('%s: fences keep rising across several expiries of the counter', async (_name, acquire) => {
  const prefix = `${uniqueKey('expiries')}:`
  const l = locker({ prefix, fenceTtl: 50 })
  const fences = await acrossExpiries(url(), prefix, () => acquire(l, 'k'))
  for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1])
})

describe('Redlock', () => {
  let servers
  beforeAll(async () => {
    servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  })
  afterAll(() => Promise.all(servers.map((s) => s.stop())))

  test('fences keep rising across expiries (the maximum of the majority), and every key has a ttl', async () => {
    const prefix = `${uniqueKey('redlock-expiries')}:`
    const l = createLocker({ urls: servers.map((s) => s.url), prefix, fenceTtl: 50 })
    lockers.push(l)
    const fences = await acrossExpiries(servers[0].url, prefix, () =>
      l.snatchTask('k', ({ fence }) => fence).then((r) => r.value),
    )
    for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1])
    await l.snatchTask('kept', () => 1)
    for (const server of servers) expect((await keysOf(server.url, prefix)).none).toBe(0)
  })
})

test.each([
  ['0', 0, RangeError],
  ['negative', -1, RangeError],
  ['fractional', 1.5, RangeError],
  ['NaN', NaN, RangeError],
  ['Infinity', Infinity, RangeError],
  ['over 2^53 - 1', 2 ** 53, RangeError],
  ['a string', '1000', TypeError],
])('fenceTtl %s: ERR_SNATCH_INVALID_ARG at createLocker', (_name, fenceTtl, Class) => {
  let err
  try {
    createLocker({ url: url(), fenceTtl }).close()
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(Class)
  expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
})
