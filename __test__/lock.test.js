'use strict'

const { createLocker, Lock, LockLostError } = require('..')
const { redisCommand } = require('./support/redis-server')
const { uniqueKey, sleep, heldBy } = require('./support/util')

const url = () => process.env.REDIS_URL

let locker
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())

test('tryLock returns a Lock with key, token, fence, signal and validUntil; null while held', async () => {
  const key = uniqueKey('try')
  const before = Date.now()
  const lock = await locker.tryLock(key, { ttl: 5000 })
  expect(lock).toBeInstanceOf(Lock)
  expect(lock.key).toBe(key)
  expect(lock.token).toMatch(/^[0-9a-f]{32}$/)
  expect(typeof lock.fence).toBe('bigint')
  expect(lock.signal.aborted).toBe(false)
  expect(lock.validUntil).toBeGreaterThan(before + 4000)
  expect(lock.validUntil).toBeLessThanOrEqual(Date.now() + 5000)
  expect(await redisCommand(url(), 'GET', `snatch:${key}`)).toBe(heldBy(lock))
  expect(await locker.tryLock(key)).toBeNull()
  expect(await lock.release()).toBe(true)
  expect(lock.signal.aborted).toBe(true)
  expect(await lock.release()).toBe(false)
  expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('a lock from a waiting acquisition is kept before it is handed out: released at once, it is released', async () => {
  // Regression: the lock reached JS a moment before its lease was kept, so a release right away could answer false
  // and leave the key held until its ttl (about 1 acquisition in 1,000 under load).
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, async (_, loop) => {
      const seen = []
      for (let i = 0; i < 250; i++) {
        const lock = await locker.lock(uniqueKey(`kept-${loop}-${i}`), { wait: 1000, ttl: 5000 })
        seen.push(lock.validUntil > Date.now() + 1000 && (await lock.release()))
      }
      return seen
    }),
  )
  expect(outcomes.flat().filter((ok) => !ok)).toHaveLength(0)
})

test('tokens are unique per acquisition', async () => {
  const key = uniqueKey('tokens')
  const tokens = new Set()
  for (let i = 0; i < 20; i++) {
    const lock = await locker.tryLock(key)
    tokens.add(lock.token)
    await lock.release()
  }
  expect(tokens.size).toBe(20)
})

test('extend renews the lease; after expiry it returns false and the signal aborts with LockLostError', async () => {
  const key = uniqueKey('extend')
  const lock = await locker.tryLock(key, { ttl: 1000 })
  expect(await lock.extend(5000)).toBe(true)
  expect(await redisCommand(url(), 'PTTL', `snatch:${key}`)).toBeGreaterThan(4000)
  await redisCommand(url(), 'DEL', `snatch:${key}`)
  expect(await lock.extend()).toBe(false)
  expect(lock.signal.aborted).toBe(true)
  expect(lock.signal.reason).toBeInstanceOf(LockLostError)
})

test('a signal first read after the lock ended is already aborted, with the reason of that end', async () => {
  const released = await locker.tryLock(uniqueKey('late-signal'))
  await released.release()
  expect(released.signal.aborted).toBe(true)
  expect(released.signal.reason).not.toBeInstanceOf(LockLostError)

  const key = uniqueKey('late-signal-lost')
  const lost = await locker.tryLock(key)
  await redisCommand(url(), 'DEL', `snatch:${key}`)
  expect(await lost.extend()).toBe(false)
  expect(lost.signal.aborted).toBe(true)
  expect(lost.signal.reason).toBeInstanceOf(LockLostError)
})

test('a holder whose lease expired cannot release or extend the next owner lock', async () => {
  const key = uniqueKey('stale')
  const stale = await locker.tryLock(key, { ttl: 100 })
  await new Promise((resolve) => stale.signal.addEventListener('abort', resolve))
  expect(stale.signal.reason).toBeInstanceOf(LockLostError)
  let owner = null
  while (owner === null) {
    owner = await locker.tryLock(key)
    if (owner === null) await sleep(10)
  }
  expect(await stale.release()).toBe(false)
  expect(await stale.extend()).toBe(false)
  expect(await redisCommand(url(), 'GET', `snatch:${key}`)).toBe(heldBy(owner))
  expect(owner.fence > stale.fence).toBe(true)
  await owner.release()
})

test('lock waits until the holder releases; rejects LockTimeoutError at the deadline', async () => {
  const key = uniqueKey('lock')
  const holder = await locker.lock(key)
  const started = Date.now()
  const err = await locker.lock(key, { wait: 250 }).catch((e) => e)
  expect(err.code).toBe('ERR_SNATCH_TIMEOUT')
  expect(Date.now() - started).toBeGreaterThanOrEqual(240)
  const next = locker.lock(key, { wait: 5000 })
  await sleep(30)
  await holder.release()
  const lock = await next
  expect(lock.fence > holder.fence).toBe(true)
  await lock.release()
})

test('autoExtend keeps a lock held past its ttl', async () => {
  const key = uniqueKey('auto')
  const lock = await locker.tryLock(key, { ttl: 150, autoExtend: true })
  await sleep(500)
  expect(lock.signal.aborted).toBe(false)
  expect(await redisCommand(url(), 'GET', `snatch:${key}`)).toBe(heldBy(lock))
  await lock.release()
})

test('without options, a lock is not renewed and a snatchTask run is (the methods\' autoExtend defaults)', async () => {
  const short = createLocker({ url: url(), ttl: 150 })
  try {
    const lock = await short.tryLock(uniqueKey('default-lock'))
    await new Promise((resolve) => lock.signal.addEventListener('abort', resolve))
    expect(lock.signal.reason).toBeInstanceOf(LockLostError)

    const key = uniqueKey('default-run')
    const outcome = await short.snatchTask(key, async ({ signal }) => {
      await sleep(500)
      return [signal.aborted, await redisCommand(url(), 'EXISTS', `snatch:${key}`)]
    })
    expect(outcome).toMatchObject({ ran: true, value: [false, 1] })
  } finally {
    await short.close()
  }
})

test('await using releases the lock (Symbol.asyncDispose)', async () => {
  const key = uniqueKey('dispose')
  const lock = await locker.tryLock(key)
  await lock[Symbol.asyncDispose]()
  expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('minHold on a Lock keeps the key after release', async () => {
  const key = uniqueKey('lockhold')
  const lock = await locker.tryLock(key, { minHold: 2000 })
  expect(await lock.release()).toBe(true)
  expect(await redisCommand(url(), 'GET', `snatch:${key}`)).toBe(heldBy(lock))
  expect(await redisCommand(url(), 'PTTL', `snatch:${key}`)).toBeGreaterThan(1000)
})
