'use strict'
// waitReplicas: an acquisition counts only once that many replicas acknowledged it (WAIT); otherwise the key is
// released, fn is not run and the call rejects RedisError saying how many acknowledged. A real master and replica.

const { createLocker } = require('../..')
const { startRedis, redisCommand } = require('../support/redis-server')
const { replicasCaughtUp } = require('../support/deployments')
const { uniqueKey } = require('../support/util')

const COMMAND_TIMEOUT = 500

let master
let replica
const lockers = []

/** A locker on the master with `waitReplicas`, closed after the suite. */
function locker(waitReplicas) {
  const made = createLocker({ url: master.url, waitReplicas, commandTimeout: COMMAND_TIMEOUT })
  lockers.push(made)
  return made
}

beforeAll(async () => {
  master = await startRedis({ args: ['--repl-diskless-sync-delay', '0'] })
  replica = await startRedis({ args: ['--replicaof', '127.0.0.1', String(master.port)] })
  await redisCommand(master.url, 'SET', 'wait-replicas:sync', '1') // something to acknowledge
  await replicasCaughtUp(master.url)
})

afterAll(async () => {
  await Promise.all(lockers.map((l) => l.close()))
  await Promise.all([replica?.stop(), master?.stop()])
})

test('with the replica acknowledging, fn runs and the replica already has the lock and its fence', async () => {
  const key = uniqueKey('wait-ok')
  const seen = await locker(1).snatchTask(key, async ({ fence }) => ({
    fence,
    replicated: await redisCommand(replica.url, 'GET', '{snatch:}:fence'),
    holder: await redisCommand(replica.url, 'EXISTS', `snatch:${key}`),
  }))
  expect(seen.ran).toBe(true)
  expect(BigInt(seen.value.replicated)).toBeGreaterThanOrEqual(seen.value.fence) // the prefix's counter
  expect(seen.value.holder).toBe(1)
  const lock = await locker(1).tryLock(uniqueKey('wait-ok-lock'))
  expect(lock).not.toBeNull()
  expect(await lock.release()).toBe(true)
})

/** What `call(fn)` on `key` comes to: its error, whether fn ran, and whether the lock key is left in Redis. */
async function refused(key, call) {
  let ran = false
  const started = Date.now()
  const err = await call(() => {
    ran = true
  }).catch((e) => e)
  return { err, ran, ms: Date.now() - started, left: await redisCommand(master.url, 'EXISTS', `snatch:${key}`) }
}

test('fewer replicas than asked for: RedisError naming how many acknowledged, fn not run, key released', async () => {
  const key = uniqueKey('wait-two')
  const { err, ran, ms, left } = await refused(key, (fn) => locker(2).snatchTask(key, fn))
  expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(err.message).toMatch(/only 1 of 2 replicas acknowledged/)
  expect(ran).toBe(false)
  expect(left).toBe(0)
  expect(ms).toBeLessThan(COMMAND_TIMEOUT * 4)
})

test('a replica that stopped answering: the acquisition fails after commandTimeout and the key is released', async () => {
  const key = uniqueKey('wait-paused')
  replica.pause()
  let outcome
  try {
    outcome = await refused(key, async () => locker(1).tryLock(key))
  } finally {
    replica.resume()
  }
  expect(outcome.err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(outcome.err.message).toMatch(/only 0 of 1 replicas acknowledged/)
  expect(outcome.left).toBe(0)
  expect(outcome.ms).toBeLessThan(COMMAND_TIMEOUT * 4)
})

test('waitReplicas: 0 (the default) waits for none: no WAIT sent', async () => {
  const before = await redisCommand(master.url, 'INFO', 'commandstats')
  const waits = (stats) => Number(/cmdstat_wait:calls=(\d+)/.exec(stats)?.[1] ?? 0)
  expect((await locker(0).snatchTask(uniqueKey('wait-none'), () => 1)).ran).toBe(true)
  expect(waits(await redisCommand(master.url, 'INFO', 'commandstats'))).toBe(waits(before))
})
