'use strict'
// One semaphore shared by several processes, some with their wall clocks shifted (support/wall-clock.js).

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker } = require('../..')
const { uniqueKey } = require('../support/util')
const { shiftedWallClock } = require('../support/wall-clock')

const url = () => process.env.REDIS_URL
const SECOND = 1000

/** Forks a permit holder, with its wall clock shifted by `skewMs` if given. */
function holder(skewMs) {
  const env = { ...process.env, ...(skewMs ? shiftedWallClock(skewMs) : {}) }
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'permit-holder.js'), { env })
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child))
    child.once('error', reject)
  })
}

/** The most intervals `[enter, exit]` that overlap at any instant. */
function mostAtOnce(runs) {
  const events = runs.flatMap(({ enter, exit }) => [
    [BigInt(enter), 1],
    [BigInt(exit), -1],
  ])
  // At one instant, exits count first: an interval that ends as another starts does not overlap it.
  events.sort(([a, da], [b, db]) => (a < b ? -1 : a > b ? 1 : da - db))
  let inside = 0
  let most = 0
  for (const [, delta] of events) most = Math.max(most, (inside += delta))
  return most
}

test('6 processes (3 with skewed wall clocks) on a semaphore of 3 for 3 s: never more than 3 inside, fences distinct', async () => {
  const key = uniqueKey('sem-procs')
  const skews = [0, 0, 0, 30 * SECOND, -30 * SECOND, 300 * SECOND]
  const children = await Promise.all(skews.map(holder))
  const reports = children.map((child) => new Promise((resolve) => child.once('message', resolve)))
  for (const child of children) child.send({ url: url(), key, limit: 3, ms: 3000, ttl: 2000 })
  const done = await Promise.all(reports)

  const skewed = done.slice(3).map((r) => r.wallClock - Date.now())
  expect(skewed.every((offset) => Math.abs(offset) > 20_000)).toBe(true)
  const runs = done.flatMap((r) => r.runs)
  expect(done.every((r) => r.runs.length > 0)).toBe(true)
  expect(mostAtOnce(runs)).toBe(3)
  expect(new Set(runs.map((r) => r.fence)).size).toBe(runs.length)
})

test("a holder SIGKILLed frees its permit when its ttl has passed on the server's clock", async () => {
  const key = uniqueKey('sem-kill')
  const child = await holder(3600 * SECOND)
  const held = new Promise((resolve) => child.once('message', resolve))
  child.send({ url: url(), key, limit: 1, ttl: 1000, hold: true })
  const { fence } = await held
  child.kill('SIGKILL')
  const locker = createLocker({ url: url() })
  try {
    const sem = locker.semaphore(key, 1)
    expect(await sem.tryAcquire()).toBeNull()
    const permit = await sem.acquire({ wait: 10_000 })
    expect(permit.fence).toBeGreaterThan(BigInt(fence))
    await permit.release()
  } finally {
    await locker.close()
  }
})
