'use strict'
// A hot key's waiters in one process: a release wakes one of them (the first still waiting), not all, so that the
// attempts Redis runs per handoff do not grow with the number of waiters; semaphores' permits the same.

const { createLocker } = require('../..')
const { startRedis, commandCalls } = require('../support/redis-server')
const { uniqueKey } = require('../support/util')

let server
let locker
beforeAll(async () => {
  server = await startRedis()
  locker = createLocker({ url: server.url })
})
afterAll(async () => {
  await locker.close()
  await server.stop()
})

/** `callers` loops of `take(key)` (resolving once it held the key and gave it back) until `total` handoffs. */
async function loops(callers, total, take) {
  let handoffs = 0
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (handoffs < total) {
        await take()
        handoffs++
      }
    }),
  )
  return handoffs
}

/** Redis commands per handoff when `callers` loop `take` for 1,000 handoffs. */
async function commandsPerHandoff(callers, take) {
  const before = await commandCalls(server.url)
  const handoffs = await loops(callers, 1000, take)
  return ((await commandCalls(server.url)) - before) / handoffs
}

test('50 waiters on one key in one process cost Redis per handoff about what one does', async () => {
  const key = uniqueKey('hot')
  const take = () => locker.withLock(key, async () => {}, { wait: 30_000 })
  const one = await commandsPerHandoff(1, take)
  // Each release woke every waiter before (about 50 attempts per handoff); now one, and the jittered retries.
  expect(await commandsPerHandoff(50, take)).toBeLessThan(3 * one)
})

test("a semaphore's waiters: a released permit wakes one of them", async () => {
  const semaphore = locker.semaphore(uniqueKey('hot-permits'), 2)
  const take = () => semaphore.withPermit(async () => {}, { wait: 30_000 })
  const few = await commandsPerHandoff(2, take)
  expect(await commandsPerHandoff(40, take)).toBeLessThan(3 * few)
})

test("no waiter starves while the others keep coming back: each gets its turns", async () => {
  const key = uniqueKey('hot-turns')
  const turns = Array(20).fill(0)
  let handoffs = 0
  await Promise.all(
    turns.map(async (_, caller) => {
      while (handoffs < 2000) {
        await locker.withLock(key, async () => {}, { wait: 30_000 })
        turns[caller]++
        handoffs++
      }
    }),
  )
  // In the order they queued: about 100 each; none left far behind.
  expect(Math.min(...turns)).toBeGreaterThan(handoffs / turns.length / 4)
})
