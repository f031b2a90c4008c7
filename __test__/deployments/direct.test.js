'use strict'
// One-attempt runs on a single Redis go by direct calls over a socket that node's event loop polls. These tests
// put a locker on that socket first, each on a redis-server of its own, and check that the runs behave as over the
// locker's own connection: results, loss, minHold, close, faults, and a worker thread torn down mid-run.

const dc = require('node:diagnostics_channel')
const { createLocker, LockLostError } = require('../..')
const { startRedis, redisCommand, commandCalls } = require('../support/redis-server')
const { directClients, onDirectSocket } = require('../support/direct')
const CLOCK_FLOOR = 2n ** 50n // a new fence counter starts from the server clock's microseconds, above this
const { uniqueKey, sleep, until, whilePaused, heldBy } = require('../support/util')

let server
let locker
beforeEach(async () => {
  server = await startRedis()
  locker = createLocker({ url: server.url, commandTimeout: 300 })
  await onDirectSocket(locker, server.url)
})
afterEach(async () => {
  await locker.close()
  await server.stop()
})

/** `{ value }` or `{ error }`: how `promise` settled. */
function settle(promise) {
  return promise.then(
    (value) => ({ value }),
    (error) => ({ error }),
  )
}

test('runs on the direct socket run once per key and resolve like any run', async () => {
  const key = uniqueKey('direct-race')
  let runs = 0
  let lost = 0
  // The run holds the key until the 19 others have answered that it was held (a second run would wait in vain).
  const results = await Promise.all(
    Array.from({ length: 20 }, () =>
      locker
        .snatchTask(key, async ({ fence }) => {
          runs++
          await until(() => lost === 19, 'the 19 other calls to find the key held')
          return fence
        })
        .then((result) => {
          if (!result.ran) lost++
          return result
        }),
    ),
  )
  expect(runs).toBe(1)
  const [won] = results.filter((r) => r.ran)
  expect(won).toEqual({ ran: true, value: won.fence, fence: won.fence })
  expect(won.fence).toBeGreaterThanOrEqual(CLOCK_FLOOR) // a new counter starts from the server's clock
  expect(results.filter((r) => !r.ran)).toHaveLength(19)
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
  expect(await locker.withLock(key, () => 'second')).toBe('second')
  const [client] = await directClients(server.url)
  // Its release, by script (or the server's own DELIFEQ, DELEX) on that socket.
  expect(client).toMatch(/ cmd=(evalsha|delifeq|delex) /)
})

// The package's own word that the direct connection is on (issue: a Node, N-API or libuv change that turned it off
// would otherwise only halve throughput, quietly): every acquire message says how its lock was taken.
test("acquire messages on diagnostics_channel say that one-attempt locks went by direct calls, and waiting ones did not", async () => {
  const seen = []
  const listen = (message) => seen.push([message.key, message.direct])
  dc.subscribe('redis-snatch:acquire', listen)
  try {
    const key = uniqueKey('direct-dc')
    await locker.snatchTask(`${key}:task`, () => {})
    await locker.withLock(`${key}:with`, () => {})
    await (await locker.tryLock(`${key}:try`)).release()
    await (await locker.lock(`${key}:wait`, { wait: 1000 })).release()
    expect(seen).toEqual([
      [`${key}:task`, true],
      [`${key}:with`, true],
      [`${key}:try`, true],
      [`${key}:wait`, false],
    ])
  } finally {
    dc.unsubscribe('redis-snatch:acquire', listen)
  }
})

test('100 concurrent loops of runs on their own keys each run every time', async () => {
  const keys = Array.from({ length: 100 }, (_, i) => uniqueKey(`direct-loop-${i}`))
  const ran = await Promise.all(
    keys.map(async (key) => {
      let count = 0
      for (let i = 0; i < 20; i++) if ((await locker.snatchTask(key, () => i)).value === i) count++
      return count
    }),
  )
  expect(ran).toEqual(keys.map(() => 20))
})

test('a task that throws rejects with its error and the key is released', async () => {
  const key = uniqueKey('direct-throw')
  const boom = new Error('boom')
  await expect(
    locker.snatchTask(key, () => {
      throw boom
    }),
  ).rejects.toBe(boom)
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('withLock without wait on a held key rejects ERR_SNATCH_TIMEOUT; snatchTask resolves ran: false', async () => {
  const key = uniqueKey('direct-held')
  const holder = await locker.tryLock(key)
  await expect(locker.withLock(key, () => 1)).rejects.toMatchObject({ code: 'ERR_SNATCH_TIMEOUT' })
  expect(await locker.snatchTask(key, () => 1)).toEqual({ ran: false })
  await holder.release()
})

test('a lease lost while the task runs aborts ctx.signal and rejects LockLostError', async () => {
  const key = uniqueKey('direct-lost')
  const err = await locker
    .snatchTask(
      key,
      async ({ signal }) => {
        await redisCommand(server.url, 'DEL', `snatch:${key}`)
        await new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)))
      },
      { ttl: 300 },
    )
    .catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
})

test('minHold keeps the key after the run', async () => {
  const key = uniqueKey('direct-minhold')
  expect((await locker.snatchTask(key, () => 'v', { minHold: 60000 })).value).toBe('v')
  expect(await redisCommand(server.url, 'PTTL', `snatch:${key}`)).toBeGreaterThan(1000)
  expect(await locker.snatchTask(key, () => 'again')).toEqual({ ran: false })
})

test("a run's options reach its lease, by a direct call and when it waits", async () => {
  const pttl = (key) => redisCommand(server.url, 'PTTL', `snatch:${key}`)
  const key = uniqueKey('direct-options')
  const direct = await locker.snatchTask(key, () => pttl(key), { ttl: 4000, autoExtend: false })
  expect(direct.value).toBeGreaterThan(3000)
  expect(direct.value).toBeLessThanOrEqual(4000)
  const waited = await locker.withLock(key, () => pttl(key), { ttl: 7000, wait: 1000, minHold: 20000 })
  expect(waited).toBeGreaterThan(6000)
  expect(waited).toBeLessThanOrEqual(7000)
  expect(await pttl(key)).toBeGreaterThan(7000)
})

test('a server that lost its scripts: the run finishes over the locker connection', async () => {
  await redisCommand(server.url, 'SCRIPT', 'FLUSH')
  const key = uniqueKey('direct-noscript')
  const first = await locker.snatchTask(key, () => 'ok')
  expect(first).toEqual({ ran: true, value: 'ok', fence: first.fence })
  expect(await locker.snatchTask(key, () => 'ok')).toEqual({ ran: true, value: 'ok', fence: first.fence + 1n })
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('a paused server: the run in flight rejects ERR_SNATCH_REDIS and fn is not run; runs resume after', async () => {
  const { err, ran } = await whilePaused(server, (fn) => locker.snatchTask(uniqueKey('direct-paused'), fn))
  expect(err.code).toBe('ERR_SNATCH_REDIS')
  expect(err.cause.message).toMatch(/timed out/)
  expect(ran).toBe(false)
  // The direct socket was closed; it opens again and runs go over it.
  await onDirectSocket(locker, server.url)
})

test('a server that refuses the direct acquisitions (Redis before 7.0) has every call on the main connection', async () => {
  // Redis 6 refuses `SET ... NX ... GET` in the socket's probe; without MULTI this server refuses the probe as well.
  const old = await startRedis({ args: ['--rename-command', 'MULTI', 'multi-renamed-away'] })
  const oldLocker = createLocker({ url: old.url })
  try {
    const key = uniqueKey('direct-refused')
    const first = await oldLocker.snatchTask(key, ({ fence }) => fence)
    expect(first).toEqual({ ran: true, value: first.fence, fence: first.fence })
    // The socket opens in the background: once its probe has been answered, it is given up for good.
    await until(async () => (await commandCalls(old.url, 'exec')) > 0, "the direct socket's probe", 5000)
    expect(await commandCalls(old.url, 'exec')).toBe(1)
    const runs = await Promise.all(Array.from({ length: 20 }, (_, i) => oldLocker.snatchTask(`${key}:${i}`, () => i)))
    expect(runs.map((r) => r.value)).toEqual(Array.from({ length: 20 }, (_, i) => i))
    const lock = await oldLocker.tryLock(key)
    expect(lock.fence).toBe(first.fence + 21n) // the 20 runs between count up the prefix's counter too
    expect(await oldLocker.tryLock(key)).toBeNull()
    expect(await lock.release()).toBe(true)
    expect(await directClients(old.url)).toEqual([])
    expect(await commandCalls(old.url, 'exec')).toBe(1)
  } finally {
    await oldLocker.close()
    await old.stop()
  }
})

test('a restarted server: the next runs work, and go over a new direct socket', async () => {
  await server.restart()
  const key = uniqueKey('direct-restart')
  const after = await locker.snatchTask(key, () => 2)
  expect(after).toEqual({ ran: true, value: 2, fence: after.fence })
  expect(after.fence).toBeGreaterThanOrEqual(CLOCK_FLOOR)
  await onDirectSocket(locker, server.url)
})

test('tryLock and release with the direct socket open: the lock is in Redis, released once, extendable', async () => {
  const key = uniqueKey('direct-trylock')
  const lock = await locker.tryLock(key, { ttl: 5000 })
  expect(lock.fence).toBeGreaterThanOrEqual(CLOCK_FLOOR)
  expect(await redisCommand(server.url, 'GET', `snatch:${key}`)).toBe(heldBy(lock))
  expect(await locker.tryLock(key)).toBeNull()
  expect(await lock.extend(60000)).toBe(true)
  expect(await redisCommand(server.url, 'PTTL', `snatch:${key}`)).toBeGreaterThan(5000)
  expect(await lock.release()).toBe(true)
  expect(await lock.release()).toBe(false)
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('replies longer than the socket reads at a time are read whole, in any number of reads', async () => {
  // A key holding a foreign value: the acquisition's SET ... GET answers that value, here 100 KB a time, so that
  // the replies of one turn span many reads and outgrow the read buffer.
  const keys = Array.from({ length: 5 }, (_, i) => uniqueKey(`direct-long-reply-${i}`))
  for (const [i, key] of keys.entries()) {
    await redisCommand(server.url, 'SET', `snatch:${key}`, String(i).repeat(100_000))
  }
  const idOf = (client) => /(?:^| )id=(\d+) /.exec(client)[1]
  const [before] = (await directClients(server.url)).map(idOf)
  const [counted, scripts] = await Promise.all(['incr', 'evalsha'].map((c) => commandCalls(server.url, c)))
  for (let round = 0; round < 3; round++) {
    const outcomes = await Promise.all(keys.map((key) => locker.tryLock(key)))
    expect(outcomes).toEqual(keys.map(() => null))
  }
  // Each attempt counted the fence up with its own commands, not by the acquire script.
  expect(await commandCalls(server.url, 'incr')).toBe(counted + 3 * keys.length)
  expect(await commandCalls(server.url, 'evalsha')).toBe(scripts)
  // On the same socket all along: it did not fail and fall back to the locker's connection.
  expect((await directClients(server.url)).map(idOf)).toEqual([before])
  const lock = await locker.tryLock(uniqueKey('direct-after-long-replies'))
  expect(await lock.release()).toBe(true)
  for (const [i, key] of keys.entries()) {
    expect(await redisCommand(server.url, 'STRLEN', `snatch:${key}`)).toBe(100_000)
    expect((await redisCommand(server.url, 'GET', `snatch:${key}`)).startsWith(String(i))).toBe(true)
  }
})

test('tryLocks made in one turn go out together; a key holding another type fails only its own', async () => {
  const [first, wrongType, second, before] = ['first', 'wrong-type', 'second', 'before'].map((name) =>
    uniqueKey(`direct-batch-${name}`),
  )
  await redisCommand(server.url, 'HSET', `snatch:${wrongType}`, 'field', 'value')
  // The prefix's counter exists (commands that found it new would go again by the acquire script).
  for (const key of [first, second, before]) await (await locker.tryLock(key)).release()
  await settle(locker.tryLock(wrongType))
  const counted = await commandCalls(server.url, 'incr')
  // Calls made while a reply is handed out (here: in the reaction to the first tryLock) are written together.
  const [, ...outcomes] = await locker
    .tryLock(before)
    .then((lock) => Promise.all([lock, ...[first, wrongType, second].map((key) => settle(locker.tryLock(key)))]))
  expect(await commandCalls(server.url, 'incr')).toBe(counted + 4)
  const [firstLock, failed, secondLock] = outcomes
  expect(failed.error).toMatchObject({ code: 'ERR_SNATCH_REDIS', message: expect.stringContaining('WRONGTYPE') })
  for (const { value: lock } of [firstLock, secondLock]) {
    expect(await redisCommand(server.url, 'GET', `snatch:${lock.key}`)).toBe(heldBy(lock))
    expect(await lock.release()).toBe(true)
  }
})

/** The server clock's µs, by TIME. */
async function serverMicros(url) {
  const [seconds, micros] = await redisCommand(url, 'TIME')
  return BigInt(seconds) * 1_000_000n + BigInt(micros)
}

test('keys locked for the first time take a SET and an INCR each, no script; the counter started from the server clock', async () => {
  const keys = Array.from({ length: 20 }, (_, i) => uniqueKey(`direct-new-${i}`))
  const commands = ['set', 'incr', 'pexpire', 'evalsha']
  // The locker's first direct acquisition keeps the counter (PEXPIRE by fenceTtl); the next ones, for a tenth of
  // fenceTtl, do not.
  await (await locker.tryLock(uniqueKey('direct-new-first'))).release()
  const before = await Promise.all(commands.map((c) => commandCalls(server.url, c)))
  const clock = await serverMicros(server.url)
  const locks = []
  for (const key of keys) locks.push(await locker.tryLock(key))
  const after = await Promise.all(commands.map((c) => commandCalls(server.url, c)))
  expect(after.map((n, i) => n - before[i])).toEqual([keys.length, keys.length, 0, 0])
  const clockAfter = await serverMicros(server.url)
  // The prefix's counter (new on this server a moment ago, at the warm-up's task, whose commands found it new and
  // went again by the acquire script) started from the server's clock; each key counts it up by one.
  expect(locks[0].fence).toBeGreaterThan(clock - 5_000_000n)
  expect(locks.at(-1).fence).toBeLessThanOrEqual(clockAfter)
  for (const [i, lock] of locks.entries()) {
    if (i > 0) expect(lock.fence).toBe(locks[i - 1].fence + 1n)
    expect(await lock.release()).toBe(true)
  }
})

test("fences rise across a counter's expiry, for a new locker and for one that counted it up lately", async () => {
  const key = uniqueKey('direct-expiring-counter')
  // A prefix of its own, whose counter only this test's lockers count up (and keep 30 ms).
  const prefix = `${key}:`
  const counterGone = () =>
    until(async () => (await redisCommand(server.url, 'EXISTS', `{${prefix}}:fence`)) === 0, 'the counter to expire')
  const fences = []
  // Each round a new locker (one at a time, each on its direct socket), twice once the counter expired: each time its
  // commands find the counter new and go again by the acquire script, which starts it from the server's clock.
  for (let round = 0; round < 3; round++) {
    await locker.close()
    locker = createLocker({ url: server.url, fenceTtl: 30, prefix })
    await onDirectSocket(locker, server.url)
    for (let time = 0; time < 2; time++) {
      await counterGone()
      const lock = await locker.tryLock(key)
      fences.push(lock.fence)
      await lock.release()
    }
  }
  for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1])
})

test('a lock from the direct socket whose lease is lost aborts its signal; close releases the others', async () => {
  const lost = await locker.tryLock(uniqueKey('direct-lock-lost'), { ttl: 300, autoExtend: true })
  const { signal } = lost
  const held = uniqueKey('direct-lock-held')
  const kept = await locker.tryLock(held, { ttl: 30000 })
  await redisCommand(server.url, 'DEL', `snatch:${lost.key}`)
  if (!signal.aborted) await new Promise((resolve) => signal.addEventListener('abort', resolve))
  expect(signal.reason.code).toBe('ERR_SNATCH_LOCK_LOST')
  expect(kept.signal.aborted).toBe(false)
  await locker.close()
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${held}`)).toBe(0)
})

test('a lock released after the server lost its scripts is released over the locker connection', async () => {
  const key = uniqueKey('direct-unlock-noscript')
  const lock = await locker.tryLock(key)
  await redisCommand(server.url, 'SCRIPT', 'FLUSH')
  expect(await lock.release()).toBe(true)
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('close waits for a run on the direct socket, then releases', async () => {
  const key = uniqueKey('direct-close')
  let finished = false
  let started
  const running = new Promise((resolve) => (started = resolve))
  const run = locker.snatchTask(key, async () => {
    started()
    await sleep(100) // still running when close() is called, which waits for it however long it takes
    finished = true
    return 'finished'
  })
  await running
  await locker.close()
  expect(finished).toBe(true)
  expect((await run).value).toBe('finished')
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(0)
  await expect(locker.snatchTask(key, () => 1)).rejects.toMatchObject({ code: 'ERR_SNATCH_CLOSED' })
  expect(await directClients(server.url)).toEqual([])
})

test('when its worker thread is terminated during a run on the direct socket, the key is released', async () => {
  const { Worker } = require('node:worker_threads')
  const { once } = require('node:events')
  const key = uniqueKey('direct-worker')
  const source = `
    const { parentPort, workerData: { pkg, support, url, key } } = require('node:worker_threads')
    const { createLocker } = require(pkg)
    const { onDirectSocket } = require(support)
    const locker = createLocker({ url })
    const running = () => {
      parentPort.postMessage('running')
      return new Promise(() => {})
    }
    onDirectSocket(locker, url).then(() => locker.snatchTask(key, running, { ttl: 30000 }))`
  const path = require('node:path')
  const support = path.join(__dirname, '..', 'support', 'direct.js')
  const workerData = { pkg: path.join(__dirname, '..', '..'), support, url: server.url, key }
  // The worker's locker is the second on this server: the test's own locker closes its direct socket first.
  await locker.close()
  const worker = new Worker(source, { eval: true, workerData })
  await once(worker, 'message')
  expect(await redisCommand(server.url, 'EXISTS', `snatch:${key}`)).toBe(1)
  const held = BigInt(await redisCommand(server.url, 'GET', '{snatch:}:fence'))
  await worker.terminate()
  locker = createLocker({ url: server.url })
  // The lease is 30 s and renewed: getting the key within 3 s means it was released. Its fence is above the worker's
  // (not necessarily the next: an attempt made before the release, which terminate() does not wait for, uses one up).
  const lock = await locker.lock(key, { wait: 3000 })
  expect(lock.fence).toBeGreaterThan(held)
  await lock.release()
})
