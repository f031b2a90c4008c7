'use strict'
// The server's own compare-and-delete and compare-and-set: on Valkey 9 and newer a lock taken without waiting is
// released by DELIFEQ, on Redis 8.4 and newer by DELEX … IFEQ, and extended by SET … IFEQ … PX on both; a lock someone
// waited for still wakes its waiters (the release script does it); on other servers the scripts do all of it. Runs on
// every server of npm test (scripts/test.js).

const { createLocker } = require('../..')
const { startRedis, redisCommand, commandCalls, compareAndDeleteOf } = require('../support/redis-server')
const { uniqueKey, until } = require('../support/util')

let server
let locker
let own // the server's compare-and-delete, if any
beforeAll(async () => {
  server = await startRedis()
  locker = createLocker({ url: server.url })
  own = await compareAndDeleteOf(server.url)
})
afterAll(async () => {
  await locker.close()
  await server.stop()
})

test('locks taken without waiting are released by the server\'s compare-and-delete where it offers one, and by script elsewhere', async () => {
  await locker.snatchTask(uniqueKey('warm'), async () => {}) // the direct connection's handshake (one probe of each)
  const before = await commandCalls(server.url, own ?? 'delifeq')
  for (let n = 0; n < 20; n++) {
    expect((await locker.snatchTask(uniqueKey('plain'), async () => n)).ran).toBe(true)
    const lock = await locker.tryLock(uniqueKey('try'))
    expect(await lock.release()).toBe(true)
  }
  const released = (await commandCalls(server.url, own ?? 'delifeq')) - before
  expect(released).toBe(own ? 40 : 0)
})

test('a lock extended by hand keeps its lease either way', async () => {
  const lock = await locker.tryLock(uniqueKey('extend'), { ttl: 2000 })
  expect(await lock.extend(50_000)).toBe(true) // an older server refuses SET's IFEQ once: learned
  const sets = await commandCalls(server.url, 'set')
  expect(await lock.extend(60_000)).toBe(true)
  // Valkey 9 and Redis 8.4 extend by SET … IFEQ … PX (the script's PEXPIRE elsewhere).
  expect((await commandCalls(server.url, 'set')) - sets).toBe(own ? 1 : 0)
  const [name] = await redisCommand(server.url, 'KEYS', `*${lock.key}`)
  expect(await redisCommand(server.url, 'PTTL', name)).toBeGreaterThan(50_000)
  expect(await lock.release()).toBe(true)
})

test('a lock someone waits for wakes the waiter when released, whichever command releases it', async () => {
  const key = uniqueKey('waited')
  const holder = await locker.tryLock(key)
  const other = createLocker({ url: server.url })
  try {
    const waiter = other.lock(key, { wait: 30_000 })
    // The waiter has made its first attempt and marked the key: it holds the holder's token and a mark.
    const lockName = (await redisCommand(server.url, 'KEYS', `*${key}`))[0]
    await until(async () => (await redisCommand(server.url, 'GET', lockName))?.endsWith('*'), 'the waiter to mark the key')
    const wakes = await commandCalls(server.url, 'publish')
    expect(await holder.release()).toBe(true)
    const lock = await waiter
    expect(lock.fence).toBeGreaterThan(holder.fence)
    expect((await commandCalls(server.url, 'publish')) - wakes).toBeGreaterThanOrEqual(1)
    await lock.release()
  } finally {
    await other.close()
  }
})
