'use strict'
// Semaphores (`locker.semaphore(key, limit)`): permits as Locks on one Redis, the limits and inputs refused. Many
// processes under clock skew: semaphore-processes.test.js; every deployment: support/every-method.js.

const { createLocker, LockLostError } = require('../..')
const { redisCommand } = require('../support/redis-server')
const { uniqueKey } = require('../support/util')

const url = () => process.env.REDIS_URL
const INVALID = 'ERR_SNATCH_INVALID_ARG'

let locker
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())

test('at most limit permits at once, each a Lock with its own rising fence; a released one can be taken', async () => {
  const sem = locker.semaphore(uniqueKey('sem'), 3)
  expect(sem).toMatchObject({ limit: 3 })
  const permits = [await sem.tryAcquire(), await sem.tryAcquire(), await sem.tryAcquire()]
  expect(permits).not.toContain(null)
  const fences = permits.map((p) => p.fence)
  expect(new Set(fences).size).toBe(3)
  expect([...fences].sort((a, b) => (a < b ? -1 : 1))).toEqual(fences)
  expect(await sem.tryAcquire()).toBeNull()
  expect(await redisCommand(url(), 'ZCARD', `snatch:${sem.key}`)).toBe(3)

  expect(await permits[0].release()).toBe(true)
  expect(permits[0].signal.aborted).toBe(true)
  const fourth = await sem.acquire({ wait: 1000 })
  expect(fourth.fence).toBeGreaterThan(fences[2])
  await Promise.all([...permits.slice(1), fourth].map((p) => p.release()))
  expect(await redisCommand(url(), 'ZCARD', `snatch:${sem.key}`)).toBe(0)
})

test('a waiter gets the permit a holder releases, and acquire() rejects LockTimeoutError when none comes', async () => {
  const sem = locker.semaphore(uniqueKey('sem-wait'), 1)
  const held = await sem.tryAcquire({ ttl: 20_000 })
  await expect(sem.acquire({ wait: 100 })).rejects.toMatchObject({ code: 'ERR_SNATCH_TIMEOUT' })
  const waiter = sem.acquire({ wait: 10_000 })
  expect(await held.release()).toBe(true)
  const next = await waiter
  expect(next.fence).toBeGreaterThan(held.fence)
  await next.release()
})

test('withPermit runs fn with key, fence and signal under a permit, and gives it back', async () => {
  const sem = locker.semaphore(uniqueKey('sem-with'), 1)
  const seen = await sem.withPermit(async ({ key, fence, signal }) => {
    expect(await sem.tryAcquire()).toBeNull()
    return { key, fence, aborted: signal.aborted }
  })
  expect(seen).toMatchObject({ key: sem.key, aborted: false })
  expect(typeof seen.fence).toBe('bigint')
  const after = await sem.tryAcquire()
  expect(after).not.toBeNull()
  await after.release()
})

test("withPermit rejects LockLostError (with fn's value) when the permit is lost under it", async () => {
  const sem = locker.semaphore(uniqueKey('sem-lost'), 2)
  const err = await sem
    .withPermit(
      async ({ signal }) => {
        await redisCommand(url(), 'DEL', `snatch:${sem.key}`)
        await new Promise((resolve) => signal.addEventListener('abort', resolve))
        return 'done'
      },
      { ttl: 300 },
    )
    .catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
  expect(err.value).toBe('done')
})

test('a permit is disposable (Symbol.asyncDispose, what `await using` calls)', async () => {
  const sem = locker.semaphore(uniqueKey('sem-using'), 1)
  const permit = await sem.acquire()
  await permit[Symbol.asyncDispose]()
  const again = await sem.tryAcquire()
  expect(again).not.toBeNull()
  await again.release()
})

test.each([
  ['zero', 0, RangeError],
  ['negative', -1, RangeError],
  ['fractional', 1.5, RangeError],
  ['NaN', NaN, RangeError],
  ['too large', 2 ** 31, RangeError],
  ['a string', '3', TypeError],
  ['missing', undefined, TypeError],
])('a limit that is %s throws ERR_SNATCH_INVALID_ARG', (_name, limit, Class) => {
  let err
  try {
    locker.semaphore('k', limit)
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(Class)
  expect(err.code).toBe(INVALID)
})

test('Redlock has no semaphores: a permit rejects TypeError ERR_SNATCH_INVALID_ARG', async () => {
  const redlock = createLocker({ urls: [url(), url(), url()] })
  const err = await redlock.semaphore('k', 2).tryAcquire().catch((e) => e)
  await redlock.close()
  expect(err).toBeInstanceOf(TypeError)
  expect(err.code).toBe(INVALID)
})
