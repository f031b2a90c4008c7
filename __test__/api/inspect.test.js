'use strict'
// inspect() and forceRelease(): what Redis holds for a key, and an operator deleting a stuck lock, on one Redis and
// on a Redlock majority. Every deployment (TLS, Cluster, Sentinel, the minimal ACL user) runs them too, in
// support/every-method.js.

const { createLocker, Lock } = require('../..')
const { startRedis, redisCommand } = require('../support/redis-server')
const { uniqueKey, until, INSTANCE } = require('../support/util')

const url = () => process.env.REDIS_URL
const INVALID = 'ERR_SNATCH_INVALID_ARG'

let locker
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())

test('inspect: null while free; the lease left, the fence and one holder while held', async () => {
  const key = uniqueKey('inspect')
  expect(await locker.inspect(key)).toBeNull()
  const lock = await locker.tryLock(key, { ttl: 30_000 })
  const held = await locker.inspect(key)
  expect(held).toEqual({ ttl: expect.any(Number), fence: expect.any(BigInt), holders: 1, holder: INSTANCE })
  // The prefix's counter: the holder's fence, or above once other keys of the prefix were acquired since.
  expect(held.fence).toBeGreaterThanOrEqual(lock.fence)
  expect(held.ttl).toBeGreaterThan(0)
  expect(held.ttl).toBeLessThanOrEqual(30_000)
  expect(await lock.release()).toBe(true)
  expect(await locker.inspect(key)).toBeNull()
})

test('forceRelease deletes the lock whoever holds it; the holder\'s renewal is refused and its signal aborts', async () => {
  const key = uniqueKey('force')
  const other = createLocker({ url: url() })
  try {
    const lock = await other.tryLock(key, { ttl: 600, autoExtend: true })
    const aborted = new Promise((resolve) => lock.signal.addEventListener('abort', resolve, { once: true }))
    expect(await locker.forceRelease(key)).toBe(true)
    expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(0)
    await aborted // at its next renewal (ttl/3) at the latest
    expect(lock.signal.reason).toMatchObject({ code: 'ERR_SNATCH_LOCK_LOST' })
    expect(await lock.release()).toBe(false)
    expect(await locker.forceRelease(key)).toBe(false)
    expect(await locker.tryLock(key)).toBeInstanceOf(Lock)
  } finally {
    await other.close()
  }
})

test('forceRelease wakes a waiter, which takes the lock with a higher fence', async () => {
  const key = uniqueKey('force-wake')
  const stuck = await locker.tryLock(key, { ttl: 60_000 })
  const waiter = createLocker({ url: url() })
  try {
    const next = waiter.lock(key, { wait: 30_000 })
    // Once the waiter has marked the lock as waited for, it listens for the release.
    await until(async () => (await redisCommand(url(), 'GET', `snatch:${key}`)).endsWith('*'), 'the waiter to mark the lock')
    expect(await locker.forceRelease(key)).toBe(true)
    const lock = await next
    expect(lock.fence).toBeGreaterThan(stuck.fence)
    await lock.release()
  } finally {
    await waiter.close()
  }
})

test('a bad key is ERR_SNATCH_INVALID_ARG', async () => {
  for (const key of ['', 5, undefined, 'x'.repeat(70 * 1024)]) {
    await expect(locker.inspect(key)).rejects.toMatchObject({ code: INVALID })
    await expect(locker.forceRelease(key)).rejects.toMatchObject({ code: INVALID })
  }
})

test('on a Redlock majority: inspect reports the lock held on a majority; forceRelease deletes it on every node', async () => {
  const servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  const redlock = createLocker({ urls: servers.map((s) => s.url), commandTimeout: 300 })
  try {
    const key = uniqueKey('redlock-inspect')
    const lock = await redlock.tryLock(key, { ttl: 30_000 })
    expect(await redlock.inspect(key)).toEqual({ ttl: expect.any(Number), fence: lock.fence, holders: 1, holder: INSTANCE })
    // Held on one node of three only: not held.
    await redisCommand(servers[0].url, 'DEL', `snatch:${key}`)
    await redisCommand(servers[1].url, 'DEL', `snatch:${key}`)
    expect(await redlock.inspect(key)).toBeNull()
    expect(await redlock.forceRelease(key)).toBe(true)
    for (const s of servers) expect(await redisCommand(s.url, 'EXISTS', `snatch:${key}`)).toBe(0)
    await servers[1].kill()
    await servers[2].kill()
    await expect(redlock.inspect(key)).rejects.toMatchObject({ code: 'ERR_SNATCH_QUORUM' })
    await expect(redlock.forceRelease(key)).rejects.toMatchObject({ code: 'ERR_SNATCH_QUORUM' })
  } finally {
    await redlock.close()
    await Promise.all(servers.map((s) => s.stop()))
  }
})
