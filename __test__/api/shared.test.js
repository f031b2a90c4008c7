'use strict'
// Shared results (locker.shared) across processes on a redis-server of the test's own (to count its commands): one
// caller runs fn, every caller gets its value; a later caller within resultTtl gets it without a run; a runner
// SIGKILLed is taken over by exactly one waiter, with a higher fence; errors are shared; a value that cannot be
// stored is a coded error for everyone.

const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const { createLocker, ResultError, LockTimeoutError } = require('../..')
const { startRedis, redisCommand } = require('../support/redis-server')
const { sleep, uniqueKey, until } = require('../support/util')

jest.setTimeout(60_000)

let server
const children = []
beforeAll(async () => {
  server = await startRedis()
})
afterAll(async () => {
  for (const child of children) child.kill('SIGKILL')
  await server?.stop()
})

/** `n` caller processes; each `call(args)` resolves its results, and `runs` collects the runs reported. */
async function callers(n, prefix) {
  const runs = []
  const procs = await Promise.all(
    Array.from({ length: n }, async () => {
      const child = fork(path.join(__dirname, '..', 'support', 'workers', 'shared-caller.js'), {
        env: { ...process.env, REDIS_URL: server.url, SNATCH_PREFIX: prefix },
      })
      children.push(child)
      child.on('message', (m) => m.event === 'run' && runs.push(m))
      await once(child, 'message')
      return child
    }),
  )
  const call = (child, args) => {
    const results = new Promise((resolve) => child.on('message', (m) => m.event === 'results' && resolve(m)))
    child.send(args)
    return results
  }
  return { procs, runs, call }
}

const commands = async () => Number(/total_commands_processed:(\d+)/.exec(await redisCommand(server.url, 'INFO', 'stats'))[1])

/** Connections subscribed to the release channel of `key` under `prefix`: the processes whose callers wait for it. */
async function waitingProcesses(prefix, key) {
  const [, count] = await redisCommand(server.url, 'PUBSUB', 'NUMSUB', `{${prefix}${key}}:released`)
  return Number(count)
}

test('3 processes x 20 callers: fn runs once, all 60 get its value; a caller within resultTtl gets it without a run, after it fn runs again', async () => {
  const prefix = `${uniqueKey('shared')}:`
  const { procs, runs, call } = await callers(3, prefix)
  const key = 'report'
  const pending = Promise.all(procs.map((p) => call(p, { key, callers: 20, fnMs: null, resultTtl: 1500, ttl: 5000 })))
  // Counted over 2 s while every caller waits (fn runs until told to finish): the runner's renewals, and no caller
  // polling.
  await until(() => runs.length === 1, 'fn to run')
  await until(async () => (await waitingProcesses(prefix, key)) >= 2, 'the other two processes to wait')
  const before = await commands()
  await sleep(2000) // time passes, in which the waiters send nothing
  const perProcessPerSecond = ((await commands()) - before - 1) / 3 / 2
  procs.find((p) => p.pid === runs[0].pid).send({ finish: true })
  const results = await pending
  console.log(`60 callers in 3 processes waiting for one run: ${perProcessPerSecond.toFixed(2)} Redis commands per process per second`)
  expect(runs).toHaveLength(1)
  const values = results.flatMap((r) => r.values)
  expect(results.flatMap((r) => r.errors)).toEqual([])
  expect(values).toHaveLength(60)
  expect(new Set(values.map((v) => JSON.stringify(v))).size).toBe(1)
  expect(values[0]).toEqual({ pid: runs[0].pid, fence: runs[0].fence })
  expect(perProcessPerSecond).toBeLessThan(2)

  const again = await call(procs[1], { key, callers: 1, fnMs: 0, resultTtl: 1500, ttl: 5000 })
  expect(again.values).toEqual([values[0]])
  expect(runs).toHaveLength(1)
  // Past resultTtl (the key expires on the server's clock), fn runs again, under a higher fence.
  const expired = async () => (await redisCommand(server.url, 'EXISTS', `{${prefix}${key}}:result`)) === 0
  await until(expired, 'the result to expire')
  const later = await call(procs[2], { key, callers: 1, fnMs: 0, resultTtl: 1500, ttl: 5000 })
  expect(runs).toHaveLength(2)
  expect(BigInt(later.values[0].fence)).toBeGreaterThan(BigInt(values[0].fence))
})

test('the runner SIGKILLed: exactly one waiter runs fn next, with a higher fence, and every caller gets its value', async () => {
  const prefix = `${uniqueKey('shared-kill')}:`
  const { procs, runs, call } = await callers(3, prefix)
  const args = { key: 'charge', callers: 5, fnMs: 1500, resultTtl: 10_000, ttl: 1000 }
  const pending = procs.map((p) => call(p, args))
  await until(() => runs.length === 1, 'fn to run')
  const victim = procs.find((p) => p.pid === runs[0].pid)
  victim.kill('SIGKILL')
  const survivors = await Promise.all(pending.filter((_, i) => procs[i] !== victim))
  expect(runs).toHaveLength(2)
  expect(runs[1].pid).not.toBe(runs[0].pid)
  expect(BigInt(runs[1].fence)).toBeGreaterThan(BigInt(runs[0].fence))
  const values = survivors.flatMap((r) => r.values)
  expect(survivors.flatMap((r) => r.errors)).toEqual([])
  expect(values).toHaveLength(10)
  expect(values.every((v) => v.pid === runs[1].pid && v.fence === runs[1].fence)).toBe(true)
})

describe('in one process', () => {
  let a, b
  beforeAll(() => {
    a = createLocker({ url: server.url })
    b = createLocker({ url: server.url })
  })
  afterAll(() => Promise.all([a.close(), b.close()]))

  /** Resolves once a caller waits for the lock of `key` (it marked the holder's token as waited for). */
  const waiterOn = (key) =>
    until(async () => (await redisCommand(server.url, 'GET', `snatch:${key}`))?.endsWith('*'), `a caller to wait for ${key}`)

  test("errors are shared with the round's waiters, not stored for later callers unless storeErrors", async () => {
    const key = uniqueKey('errors')
    let runs = 0
    const fail = () => {
      throw Object.assign(new RangeError('out of stock'), { code: 'E_STOCK' })
    }
    const failing = async () => {
      runs++
      await waiterOn(key) // the round's waiters are waiting when it fails
      fail()
    }
    const settled = await Promise.allSettled([a.shared(key, failing), b.shared(key, failing), b.shared(key, failing)])
    expect(runs).toBe(1)
    for (const s of settled) {
      expect(s.status).toBe('rejected')
      expect(s.reason).toBeInstanceOf(RangeError)
      expect(s.reason).toMatchObject({ code: 'E_STOCK', message: 'out of stock' })
    }
    expect(await b.shared(key, () => 'fixed')).toBe('fixed')
    const stored = uniqueKey('stored-errors')
    await expect(a.shared(stored, async () => fail(), { storeErrors: true })).rejects.toMatchObject({ code: 'E_STOCK' })
    await expect(b.shared(stored, () => 'not run', { storeErrors: true })).rejects.toMatchObject({ code: 'E_STOCK' })
  })

  test('values round-trip (bigint, Date, Buffer, undefined, custom serialize); what cannot be stored is ERR_SNATCH_RESULT for everyone', async () => {
    const value = { n: 2n ** 70n, at: new Date(86_400_000), list: [1, 'two', null], nested: { ok: true } }
    const key = uniqueKey('values')
    expect(await a.shared(key, () => value)).toEqual(value)
    expect(await b.shared(key, () => 'not run')).toEqual(value)
    expect(await b.shared(uniqueKey('bytes'), () => Buffer.from([0, 255, 10]))).toEqual(Buffer.from([0, 255, 10]))
    expect(await b.shared(uniqueKey('undefined'), () => undefined)).toBeUndefined()
    const custom = { serialize: (m) => JSON.stringify([...m]), deserialize: (buf) => new Map(JSON.parse(buf.toString())) }
    const mapKey = uniqueKey('map')
    await a.shared(mapKey, () => new Map([['a', 1]]), custom)
    expect(await b.shared(mapKey, () => null, custom)).toEqual(new Map([['a', 1]]))

    for (const [what, fn, options] of [
      ['circular', () => { const o = {}; o.self = o; return o }, {}],
      ['oversized', () => 'x'.repeat(5000), { maxResultBytes: 1000 }],
    ]) {
      const k = uniqueKey(what)
      const slow = async () => (await waiterOn(k), fn()) // the other caller waits for this round
      const settled = await Promise.allSettled([a.shared(k, slow, options), b.shared(k, slow, options)])
      for (const s of settled) expect(s.reason).toMatchObject({ code: 'ERR_SNATCH_RESULT' })
      expect(settled[0].reason).toBeInstanceOf(ResultError)
    }
  })

  test("a waiter's wait and signal bound its own wait; bad options are refused", async () => {
    const key = uniqueKey('bounds')
    let started
    const running = new Promise((resolve) => (started = resolve))
    let finish
    const finished = new Promise((resolve) => (finish = resolve))
    const long = a.shared(key, () => (started(), finished))
    await running // a holds the lock, computing the value
    await expect(b.shared(key, () => 'x', { wait: 200 })).rejects.toBeInstanceOf(LockTimeoutError)
    const controller = new AbortController()
    const aborted = b.shared(key, () => 'x', { signal: controller.signal })
    controller.abort(new Error('gave up'))
    await expect(aborted).rejects.toThrow('gave up')
    finish('late')
    expect(await long).toBe('late')
    expect(await b.shared(key, () => 'not run')).toBe('late')
    for (const options of [{ resultTtl: 0 }, { maxResultBytes: -1 }, { serialize: JSON.stringify }, { signal: 'no' }, { resultTTL: 5 }]) {
      await expect(a.shared(key, () => 1, options)).rejects.toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG' })
    }
    const redlock = createLocker({ urls: [server.url, server.url, server.url] })
    await expect(redlock.shared(key, () => 1)).rejects.toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG' })
    await redlock.close()
  })
})
