'use strict'

const dc = require('node:diagnostics_channel')
const { once } = require('node:events')
const { createLocker, RedisError } = require('../..')
const diagnostics = require('../../lib/diagnostics')
const { redisCommand, freePort } = require('../support/redis-server')
const { next, uniqueKey } = require('../support/util')

const url = () => process.env.REDIS_URL
const CHANNELS = ['acquire', 'release', 'lost', 'error']

/** Subscribes to every channel; `seen(key)` lists `[channel, message]` for `key` in the order published. */
function listen() {
  const all = []
  const subscribers = CHANNELS.map((name) => {
    const subscriber = (message) => all.push([name, message])
    dc.subscribe(`redis-snatch:${name}`, subscriber)
    return [name, subscriber]
  })
  return {
    seen: (key) => all.filter(([, message]) => message.key.startsWith(key)),
    stop: () => subscribers.forEach(([name, subscriber]) => dc.unsubscribe(`redis-snatch:${name}`, subscriber)),
  }
}

let locker, listener
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())
beforeEach(() => {
  listener = listen()
})
afterEach(() => listener.stop())

test('a lock that is lost (its key deleted under it) publishes acquire, lost, release in that order', async () => {
  const key = uniqueKey('dc-lost')
  const lock = await locker.tryLock(key, { ttl: 300, autoExtend: true })
  await redisCommand(url(), 'DEL', `snatch:${key}`)
  await once(lock.signal, 'abort')
  expect(await lock.release()).toBe(false)

  const seen = listener.seen(key)
  expect(seen.map(([name]) => name)).toEqual(['acquire', 'lost', 'release'])
  for (const [, message] of seen) {
    expect(message.key).toBe(key)
    expect(message.fence).toBe(lock.fence)
    expect(message.ms).toBeGreaterThanOrEqual(0)
  }
  expect(seen[2][1].released).toBe(false)
  expect(seen[1][1].ms).toBeGreaterThan(0)
})

test('a task publishes acquire then release with its fence, and the time it was held', async () => {
  const key = uniqueKey('dc-task')
  const { fence } = await locker.snatchTask(key, () => new Promise((resolve) => setTimeout(resolve, 20)))
  const seen = listener.seen(key)
  expect(seen.map(([name]) => name)).toEqual(['acquire', 'release'])
  expect(seen.map(([, m]) => m.fence)).toEqual([fence, fence])
  expect(seen[1][1]).toMatchObject({ key, released: true })
  expect(seen[1][1].ms).toBeGreaterThanOrEqual(15)
})

test('a released lock publishes release once, even when released twice', async () => {
  const key = uniqueKey('dc-twice')
  const lock = await locker.tryLock(key)
  expect(await lock.release()).toBe(true)
  expect(await lock.release()).toBe(false)
  expect(listener.seen(key).map(([name, m]) => [name, m.released])).toEqual([
    ['acquire', undefined],
    ['release', true],
  ])
})

test('a call that fails publishes error with the key and the error', async () => {
  const down = createLocker({ url: `redis://127.0.0.1:${await freePort()}`, commandTimeout: 200 })
  const key = uniqueKey('dc-error')
  const err = await down.tryLock(key).catch((e) => e)
  await down.close()
  expect(err).toBeInstanceOf(RedisError)
  const seen = listener.seen(key)
  expect(seen.map(([name]) => name)).toEqual(['error'])
  expect(seen[0][1].error).toBe(err)
})

test("a schedule's occurrence publishes acquire then release under the occurrence's key", async () => {
  const name = uniqueKey('dc-schedule')
  const task = locker.schedule(name, '*/1 * * * * *', () => 'value')
  const [run] = await once(task, 'run')
  await task.stop()
  const key = `${name}:${run.tick.getTime()}`
  expect(listener.seen(key).map(([channel, m]) => [channel, m.key, m.fence, m.released])).toEqual([
    ['acquire', key, run.fence, undefined],
    ['release', key, run.fence, true],
  ])
})

test('with no subscriber, no timestamp is taken for messages', () => {
  listener.stop()
  expect(CHANNELS.some((name) => dc.hasSubscribers(`redis-snatch:${name}`))).toBe(false)
  expect(diagnostics.now()).toBe(0)
  listener = listen()
  expect(diagnostics.now()).toBeGreaterThan(0)
})

test("a call publishes start first, in the caller's async context, and its later messages carry it; busy when held", async () => {
  const { AsyncLocalStorage } = require('node:async_hooks')
  const request = new AsyncLocalStorage()
  const starts = []
  const onStart = (message) => starts.push([message, request.getStore()])
  dc.subscribe('redis-snatch:start', onStart)
  const busy = []
  const onBusy = (message) => busy.push(message)
  dc.subscribe('redis-snatch:busy', onBusy)
  try {
    const key = uniqueKey('dc-start')
    await request.run('request-1', () => locker.snatchTask(key, () => 1))
    const held = await locker.tryLock(key)
    expect((await request.run('request-2', () => locker.snatchTask(key, () => 1))).ran).toBe(false)
    await held.release()
    const ours = starts.filter(([m]) => m.key === key)
    expect(ours.map(([m, store]) => [m.method, store])).toEqual([['snatchTask', 'request-1'], ['tryLock', undefined], ['snatchTask', 'request-2']])
    expect(ours.every(([m]) => m.locker === locker)).toBe(true)
    const [acquired, released] = listener.seen(key).slice(0, 2)
    expect(acquired[1].start).toBe(ours[0][0])
    expect(released[1].start).toBe(ours[0][0])
    expect(busy.filter((m) => m.key === key)).toEqual([{ key, ms: expect.any(Number), start: ours[2][0] }])
  } finally {
    dc.unsubscribe('redis-snatch:start', onStart)
    dc.unsubscribe('redis-snatch:busy', onBusy)
  }
})

test("a schedule's attempt publishes attempt when it ended, as its record says", async () => {
  const attempts = []
  const onAttempt = (message) => attempts.push(message)
  dc.subscribe('redis-snatch:attempt', onAttempt)
  try {
    const name = uniqueKey('dc-attempt')
    let calls = 0
    const task = locker.schedule(name, '* * * * * *', () => {
      if (++calls === 1) throw new Error('first')
    }, { retries: 1, retryDelay: 50 })
    task.on('error', () => {})
    await next(task, 'run')
    await task.stop()
    const mine = attempts.filter((m) => m.schedule === name)
    const ours = mine.filter((m) => m.tick.getTime() === mine[0].tick.getTime())
    expect(ours.map((m) => [m.attempt, m.why, m.ending, m.error?.message])).toEqual([[1, 'on-time', 'failed', 'first'], [2, 'retry', 'ok', undefined]])
    const record = (await locker.history(name)).find((r) => r.tick.getTime() === ours[1].tick.getTime() && r.attempt === 2)
    expect(ours[1]).toMatchObject({ tick: record.tick, fence: record.fence, instance: record.instance })
    expect(ours[1].lagMs).toBeGreaterThanOrEqual(0)
  } finally {
    dc.unsubscribe('redis-snatch:attempt', onAttempt)
  }
})
