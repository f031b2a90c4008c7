'use strict'
// One suite, two backends: the locker's contract on a real Redis and on `memory://`, the in-process store for
// users' tests (docs/testing.md).

const { once } = require('node:events')
const { createLocker, LockLostError, LockTimeoutError } = require('../..')
const { bufferChecks, fleetChecks, handOverChecks, severalKeysChecks, sharedChecks, idempotencyChecks, storedChecks } = require('../support/every-method')
const { uniqueKey } = require('../support/util')

describe.each([
  ['Redis', () => process.env.REDIS_URL],
  ['memory://', () => `memory://backends-${process.pid}`],
])('on %s', (_name, url) => {
  let a, b
  beforeAll(() => {
    // Two lockers: two replicas of a service.
    a = createLocker({ url: url() })
    b = createLocker({ url: url() })
  })
  afterAll(() => Promise.all([a.close(), b.close()]))

  test('snatchTask runs on one replica only, and fences rise', async () => {
    const key = uniqueKey('once')
    let inner
    const outer = await a.snatchTask(key, async () => {
      inner = await b.snatchTask(key, () => 'second')
      return 'first'
    })
    expect(outer).toMatchObject({ ran: true, value: 'first' })
    expect(inner).toEqual({ ran: false })
    const again = await b.snatchTask(key, () => 'again')
    expect(again.fence).toBeGreaterThan(outer.fence)
  })

  test('a waiter gets the lock when its holder releases it; lock() times out with LockTimeoutError', async () => {
    const key = uniqueKey('handoff')
    const held = await a.lock(key, { ttl: 10_000 })
    await expect(b.lock(key, { wait: 50 })).rejects.toBeInstanceOf(LockTimeoutError)
    const waiter = b.withLock(key, ({ fence }) => fence, { wait: 10_000 })
    expect(await held.release()).toBe(true)
    expect(await waiter).toBeGreaterThan(held.fence)
    expect(await held.release()).toBe(false)
  })

  test('fair waiters get the lock when its holder releases it; one that gives up does not block the other', async () => {
    const key = uniqueKey('fair')
    const held = await a.lock(key, { ttl: 10_000 })
    const waiter = b.withLock(key, ({ fence }) => fence, { wait: 10_000, fair: true })
    await expect(a.lock(key, { wait: 50, fair: true })).rejects.toBeInstanceOf(LockTimeoutError)
    expect(await held.release()).toBe(true)
    expect(await waiter).toBeGreaterThan(held.fence)
  })

  test('a lease expires, and an extended one does not', async () => {
    const key = uniqueKey('expiry')
    const short = await a.tryLock(key, { ttl: 100 })
    const next = await b.lock(key, { wait: 5_000 })
    expect(next.fence).toBeGreaterThan(short.fence)
    expect(await short.extend()).toBe(false)
    expect(short.signal.aborted).toBe(true)
    expect(await next.extend(5_000)).toBe(true)
    expect(await a.tryLock(key)).toBeNull()
    await next.release()
  })

  test("a lock deleted under its holder is lost: signal aborts with LockLostError, withLock rejects with fn's value", async () => {
    const key = uniqueKey('lost')
    const err = await a
      .withLock(
        key,
        async ({ signal }) => {
          expect(await b.forceRelease(key)).toBe(true)
          await once(signal, 'abort')
          return signal.reason instanceof LockLostError
        },
        { ttl: 300 },
      )
      .catch((e) => e)
    expect(err).toBeInstanceOf(LockLostError)
    expect(err.value).toBe(true)
  })

  test('inspect sees the holder and forceRelease frees it', async () => {
    const key = uniqueKey('inspect')
    expect(await a.inspect(key)).toBeNull()
    const lock = await a.tryLock(key, { ttl: 10_000 })
    const held = await b.inspect(key)
    expect(held).toMatchObject({ holders: 1 })
    expect(held.fence).toBeGreaterThanOrEqual(lock.fence) // the prefix's counter: the holder's fence or above
    expect(await b.forceRelease(key)).toBe(true)
    expect(await b.tryLock(key)).not.toBeNull()
  })

  test('a semaphore lets limit holders in, across replicas', async () => {
    const key = uniqueKey('sem')
    const permits = [await a.semaphore(key, 2).tryAcquire(), await b.semaphore(key, 2).tryAcquire()]
    expect(permits).not.toContain(null)
    expect(await a.semaphore(key, 2).tryAcquire()).toBeNull()
    const waiter = b.semaphore(key, 2).acquire({ wait: 10_000 })
    await permits[0].release()
    expect((await waiter).fence).toBeGreaterThan(permits[1].fence)
  })

  test('a schedule on two replicas runs each occurrence once', async () => {
    const name = uniqueKey('cron')
    const ticks = []
    let twoRan
    const ran = new Promise((resolve) => (twoRan = resolve))
    const task = ({ tick }) => {
      ticks.push(tick.getTime())
      if (ticks.length === 2) twoRan()
    }
    const tasks = [a, b].map((l) => l.schedule(name, '* * * * * *', task))
    await ran
    await Promise.all(tasks.map((t) => t.stop()))
    expect(ticks.length).toBeGreaterThanOrEqual(2)
    expect(new Set(ticks).size).toBe(ticks.length)
  })

  test("the fleet's schedules, records, suspend, resume, trigger and locks", async () => {
    await fleetChecks({ locker: a, other: b })
  })

  test('stored schedules: runners on both lockers, each occurrence once, listed, read and removed', async () => {
    await storedChecks({ locker: a, other: b })
  })

  test("a schedule with concurrency 'buffer' and jitter: one at a time, a waiting occurrence run after the running one", async () => {
    await bufferChecks({ locker: a, other: b })
  })

  test('a lock handed over is adopted by another locker, which renews and releases it', async () => {
    await handOverChecks({ locker: a, other: b })
    const permit = await a.semaphore(uniqueKey('permit-handoff'), 2).tryAcquire()
    expect(() => permit.handoff()).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
    expect(await permit.release()).toBe(true)
  })

  test('several keys at once: all or none, one fence per key, a waiting set gets them all', async () => {
    await severalKeysChecks({ locker: a, other: b })
  })

  test('shared results: one run, every caller gets its value, errors shared; idempotency keys on them', async () => {
    await sharedChecks({ locker: a, other: b })
    await idempotencyChecks({ locker: a, other: b })
  })
})
