'use strict'

const { createLocker, snatchTask, LockLostError } = require('../..')
const { redisCommand } = require('../support/redis-server')
const { uniqueKey, sleep, until } = require('../support/util')

const url = () => process.env.REDIS_URL

let locker
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())

test('20 concurrent snatchTask calls on one key: exactly one runs', async () => {
  const key = uniqueKey('race')
  let runs = 0
  let lost = 0
  // The run holds the key until the 19 others have answered that it was held (a second run would wait in vain).
  const results = await Promise.all(
    Array.from({ length: 20 }, () =>
      locker
        .snatchTask(key, async () => {
          runs++
          await until(() => lost === 19, 'the 19 other calls to find the key held')
          return 'done'
        })
        .then((result) => {
          if (!result.ran) lost++
          return result
        }),
    ),
  )
  expect(runs).toBe(1)
  expect(results.filter((r) => r.ran)).toEqual([{ ran: true, value: 'done', fence: expect.any(BigInt) }])
  expect(results.filter((r) => !r.ran)).toHaveLength(19)
  for (const r of results.filter((r) => !r.ran)) expect(r).toEqual({ ran: false })
})

test('fences strictly increase over 100 sequential acquisitions', async () => {
  const key = uniqueKey('fence')
  let last = 0n
  for (let i = 0; i < 100; i++) {
    const r = await locker.snatchTask(key, ({ fence }) => fence)
    expect(r.ran).toBe(true)
    expect(typeof r.fence).toBe('bigint')
    expect(r.value).toBe(r.fence)
    expect(r.fence > last).toBe(true)
    last = r.fence
  }
})

test('the task gets key, fence and a live signal, and the key is deleted afterwards', async () => {
  const key = uniqueKey('ctx')
  const r = await locker.snatchTask(key, async (ctx) => {
    expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(1)
    return { key: ctx.key, aborted: ctx.signal.aborted, isSignal: ctx.signal instanceof AbortSignal, fence: ctx.fence }
  })
  expect(r.value).toEqual({ key, aborted: false, isSignal: true, fence: r.fence })
  expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(0)
})

test.each([
  ['a string', 'text'],
  ['an object', { nested: [1, 2] }],
  ['undefined', undefined],
  ['null', null],
  ['a bigint', 2n ** 70n],
  ['a number', 4.5],
])('%s returned by the task round-trips, plain or awaited', async (_name, value) => {
  const plain = await locker.snatchTask(uniqueKey('value'), () => value)
  const awaited = await locker.snatchTask(uniqueKey('value'), async () => value)
  expect(plain).toEqual({ ran: true, value, fence: expect.any(BigInt) })
  expect(awaited.value).toBe(plain.value)
})

test('a returned object keeps its identity', async () => {
  const value = { id: 1 }
  expect((await locker.snatchTask(uniqueKey('identity'), async () => value)).value).toBe(value)
})

test.each([
  ['synchronous throw', (err) => () => {
    throw err
  }],
  ['rejection', (err) => async () => {
    await sleep(5)
    throw err
  }],
])('a %s is rethrown as the same object after the lock is released', async (_name, makeFn) => {
  const key = uniqueKey('throw')
  const err = Object.assign(new Error('boom'), { custom: 42 })
  const thrown = await locker.snatchTask(key, makeFn(err)).catch((e) => e)
  expect(thrown).toBe(err)
  expect(thrown.custom).toBe(42)
  expect(await redisCommand(url(), 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('a thrown non-Error value is rethrown as is', async () => {
  await expect(locker.snatchTask(uniqueKey('throw'), () => Promise.reject('plain string'))).rejects.toBe('plain string')
})

test('minHold keeps the key after the task, then frees it', async () => {
  const key = uniqueKey('minhold')
  const first = await locker.snatchTask(key, () => 1, { minHold: 500 })
  expect(first.ran).toBe(true)
  const pttl = await redisCommand(url(), 'PTTL', `snatch:${key}`)
  expect(pttl).toBeGreaterThan(0)
  expect(pttl).toBeLessThanOrEqual(500)
  expect(await locker.snatchTask(key, () => 2)).toEqual({ ran: false })
  await until(async () => (await redisCommand(url(), 'PTTL', `snatch:${key}`)) === -2, 'the key to expire', 2000)
  expect((await locker.snatchTask(key, () => 3)).ran).toBe(true)
})

test('a task lasting 4x the ttl stays exclusive thanks to auto-extension', async () => {
  const key = uniqueKey('long')
  const ttl = 200
  let attempts = 0
  let stolen = 0
  let done = false
  let contender
  const r = await locker.snatchTask(
    key,
    async ({ signal }) => {
      contender = (async () => {
        while (!done) {
          attempts++
          // Counted only while the long task still runs: `done` is set before it returns and releases.
          await locker.snatchTask(key, () => (done ? 0 : stolen++), { ttl })
          await sleep(20)
        }
      })()
      await sleep(4 * ttl) // time passes: four ttls, which only the renewals cover
      done = true
      return signal.aborted
    },
    { ttl },
  )
  await contender
  expect(r).toEqual({ ran: true, value: false, fence: expect.any(BigInt) })
  expect(attempts).toBeGreaterThan(5)
  expect(stolen).toBe(0)
})

test('deleting the key mid-run aborts the signal and rejects LOCK_LOST with the value', async () => {
  const key = uniqueKey('lost')
  const ttl = 300
  const outcome = locker.snatchTask(
    key,
    async ({ signal }) => {
      await redisCommand(url(), 'DEL', `snatch:${key}`)
      const reason = await new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason)))
      return { reason }
    },
    { ttl },
  )
  const err = await outcome.catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
  expect(err.code).toBe('ERR_SNATCH_LOCK_LOST')
  expect(err.value.reason).toBe(err)
})

test('without auto-extension, a task outliving its lease rejects LOCK_LOST and its signal aborted before the end', async () => {
  const key = uniqueKey('noextend')
  let abortedAt = 0
  let started = 0
  const err = await locker
    .snatchTask(
      key,
      async ({ signal }) => {
        started = Date.now()
        // The task outlives its lease: it ends only once the signal aborts.
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
        abortedAt = Date.now()
        return 'late'
      },
      // The lost notice comes a tenth of the ttl (200 ms) before the lease ends: room for a loaded machine's
      // event loop to deliver it while the lease still holds.
      { ttl: 2000, autoExtend: false },
    )
    .catch((e) => e)
  expect(err.code).toBe('ERR_SNATCH_LOCK_LOST')
  expect(err.value).toBe('late')
  expect(abortedAt).toBeGreaterThan(0)
  // The key was set before `started`, so the lease (2000 ms) had not expired yet when the signal aborted.
  expect(abortedAt - started).toBeLessThan(2000)
})

test('a task that never read its signal still finds it aborted by the loss afterwards', async () => {
  let ctx
  const err = await locker
    .snatchTask(
      uniqueKey('lazysignal'),
      async (c) => {
        ctx = c
        await sleep(600) // time passes: past the 300 ms lease
      },
      { ttl: 300, autoExtend: false },
    )
    .catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
  expect(ctx.signal.aborted).toBe(true)
  expect(ctx.signal.reason).toBe(err)
})

test('a task that rejects because its lease was lost gets the LockLostError rethrown', async () => {
  const key = uniqueKey('lostreject')
  const err = await locker
    .snatchTask(
      key,
      async ({ signal }) => {
        await redisCommand(url(), 'DEL', `snatch:${key}`)
        await new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
      },
      { ttl: 300 },
    )
    .catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
  expect(err.cause).toBeUndefined()
})

test('withLock waits for the holder and resolves the value; times out otherwise', async () => {
  const key = uniqueKey('withlock')
  const holder = await locker.tryLock(key)
  let released = false
  const waiting = locker.withLock(key, ({ fence }) => [released, fence], { wait: 5000 })
  // It tried and waits: it marked the holder's token as waited for.
  await until(async () => (await redisCommand(url(), 'GET', `snatch:${key}`)).endsWith('*'), 'the withLock to wait')
  released = true
  await holder.release()
  const [ranAfterRelease, fence] = await waiting
  expect(ranAfterRelease).toBe(true)
  expect(fence).toBeGreaterThan(holder.fence)
  const again = await locker.tryLock(key)
  const timedOut = await locker.withLock(key, () => 'never', { wait: 200 }).catch((e) => e)
  expect(timedOut.code).toBe('ERR_SNATCH_TIMEOUT')
  expect(timedOut.name).toBe('LockTimeoutError')
  await again.release()
})

test('withLock without wait makes one attempt and rejects when the key is held', async () => {
  const key = uniqueKey('withlock0')
  const holder = await locker.tryLock(key)
  await expect(locker.withLock(key, () => 1)).rejects.toMatchObject({ code: 'ERR_SNATCH_TIMEOUT' })
  await holder.release()
  await expect(locker.withLock(key, () => 1)).resolves.toBe(1)
})

test('the module-level snatchTask uses a default locker on REDIS_URL', async () => {
  const key = uniqueKey('default')
  expect(await snatchTask(key, () => 'ok')).toEqual({ ran: true, value: 'ok', fence: expect.any(BigInt) })
})

test.each([
  ['a run whose task is under way', 'createLocker({ url }).snatchTask(key, () => { done(); return new Promise(() => {}) }, { ttl: 30000 })'],
  ['a held lock with autoExtend', 'createLocker({ url }).tryLock(key, { ttl: 30000, autoExtend: true }).then(done)'],
])('when its worker thread is terminated, %s is released instead of renewed for nobody', async (_, start) => {
  const { Worker } = require('node:worker_threads')
  const { once } = require('node:events')
  const key = uniqueKey('worker-gone')
  const source = `
    const { parentPort, workerData: { pkg, url, key } } = require('node:worker_threads')
    const { createLocker } = require(pkg)
    const done = () => parentPort.postMessage('holding')
    ${start}`
  const workerData = { pkg: require('node:path').join(__dirname, '..', '..'), url: url(), key }
  const worker = new Worker(source, { eval: true, workerData })
  await once(worker, 'message')
  await worker.terminate()
  // The holder's lease is 30 s and was being renewed: getting the key within 3 s means it was released.
  const lock = await locker.lock(key, { wait: 3000 })
  expect(lock.fence).toBeGreaterThan(0n)
  await lock.release()
})
