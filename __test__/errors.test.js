'use strict'

const {
  createLocker,
  Locker,
  SnatchError,
  RedisError,
  ClosedError,
} = require('..')
const { startRedis, redisCommand } = require('./support/redis-server')
const { uniqueKey, whilePaused } = require('./support/util')

const url = () => process.env.REDIS_URL

const INVALID = 'ERR_SNATCH_INVALID_ARG'

describe('bad input', () => {
  let locker
  beforeAll(() => {
    locker = createLocker({ url: url() })
  })
  afterAll(() => locker.close())

  const fn = () => 'ran'

  test.each([
    ['empty key', (l) => l.snatchTask('', fn), TypeError],
    ['key over 64 KiB', (l) => l.snatchTask('k'.repeat(64 * 1024 + 1), fn), RangeError],
    ['key not a string', (l) => l.snatchTask(42, fn), TypeError],
    ['fn not a function', (l) => l.snatchTask('k', 'nope'), TypeError],
    ['ttl zero', (l) => l.snatchTask('k', fn, { ttl: 0 }), RangeError],
    ['ttl negative', (l) => l.snatchTask('k', fn, { ttl: -5 }), RangeError],
    ['ttl fractional', (l) => l.snatchTask('k', fn, { ttl: 1.5 }), RangeError],
    ['ttl NaN', (l) => l.snatchTask('k', fn, { ttl: NaN }), RangeError],
    ['ttl Infinity', (l) => l.snatchTask('k', fn, { ttl: Infinity }), RangeError],
    ['ttl too large', (l) => l.snatchTask('k', fn, { ttl: 2 ** 31 }), RangeError],
    ['ttl a string', (l) => l.snatchTask('k', fn, { ttl: '100' }), TypeError],
    ['minHold negative', (l) => l.snatchTask('k', fn, { minHold: -1 }), RangeError],
    ['autoExtend not boolean', (l) => l.snatchTask('k', fn, { autoExtend: 'yes' }), TypeError],
    ['options not an object', (l) => l.snatchTask('k', fn, 5), TypeError],
    ['wait on snatchTask', (l) => l.snatchTask('k', fn, { wait: 100 }), TypeError],
    ['wait negative', (l) => l.withLock('k', fn, { wait: -1 }), RangeError],
    ['withLock fn missing', (l) => l.withLock('k'), TypeError],
    ['tryLock empty key', (l) => l.tryLock(''), TypeError],
    ['lock ttl zero', (l) => l.lock('k', { ttl: 0 }), RangeError],
    ['fair not boolean', (l) => l.lock('k', { fair: 'yes' }), TypeError],
    ['fair on tryLock (one attempt)', (l) => l.tryLock('k', { fair: true }), TypeError],
    ['fair on snatchTask (one attempt)', (l) => l.snatchTask('k', fn, { fair: true }), TypeError],
    ['fair on a read-write lock', (l) => l.rwlock('r').write({ wait: 100, fair: true }), TypeError],
  ])('%s rejects with %p and ERR_SNATCH_INVALID_ARG, without running fn', async (_name, call, Class) => {
    const err = await call(locker).then(
      (v) => v,
      (e) => e,
    )
    expect(err).toBeInstanceOf(Class)
    expect(err.code).toBe(INVALID)
    expect(err.message.length).toBeGreaterThan(10)
  })

  test('extend with a bad ttl rejects and keeps the lock', async () => {
    const key = uniqueKey('badextend')
    const lock = await locker.tryLock(key)
    await expect(lock.extend(-1)).rejects.toMatchObject({ code: INVALID, name: 'RangeError' })
    await expect(lock.extend('1')).rejects.toMatchObject({ code: INVALID, name: 'TypeError' })
    expect(lock.signal.aborted).toBe(false)
    expect(await lock.release()).toBe(true)
  })

  test.each([
    ['bad URL', { url: 'http://example' }, TypeError],
    ['unparsable URL', { url: 'not a url' }, TypeError],
    ['url and urls together', { url: url(), urls: [url(), url(), url()] }, TypeError],
    ['urls not strings', { urls: [1, 2, 3] }, TypeError],
    ['even number of urls', { urls: ['redis://a:1', 'redis://b:1'] }, RangeError],
    ['ttl zero', { ttl: 0 }, RangeError],
    ['commandTimeout negative', { commandTimeout: -1 }, RangeError],
    ['driftFactor out of range', { driftFactor: 2 }, RangeError],
    ['prefix not a string', { prefix: 1 }, TypeError],
    ['options not an object', 'redis://localhost', TypeError],
  ])('constructor with %s throws %p synchronously', (_name, options, Class) => {
    let err
    try {
      new Locker(options)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(Class)
    expect(err.code).toBe(INVALID)
  })

  test('a bad key leaves no lock behind', async () => {
    await locker.snatchTask('', fn).catch(() => {})
    expect(await redisCommand(url(), 'EXISTS', 'snatch:')).toBe(0)
  })
})

test('unknown options anywhere are errors naming them, with the closest known name', async () => {
  const cases = [
    [() => createLocker({ urll: 'redis://127.0.0.1:6379' }), "unknown option 'urll' (did you mean 'url' or 'urls'?)"],
    [() => createLocker({ url: 'memory://', tll: 5000 }), "unknown option 'tll' (did you mean 'tls' or 'ttl'?)"],
    [() => createLocker({ sentinel: { urls: ['redis://127.0.0.1:26379'], nmae: 'm' } }), "unknown option 'sentinel.nmae' (did you mean 'sentinel.name'?)"],
    [() => createLocker({ url: 'rediss://127.0.0.1:1', tls: { rejectUnauthorised: false } }), "unknown option 'tls.rejectUnauthorised' (did you mean 'tls.rejectUnauthorized'?)"],
  ]
  for (const [call, message] of cases) {
    expect(call).toThrow(expect.objectContaining({ name: 'TypeError', code: 'ERR_SNATCH_INVALID_ARG', message }))
  }
  const locker = createLocker({ url: 'memory://' })
  const rejections = [
    [locker.withLock('k', () => {}, { waitt: 100 }), "unknown option 'waitt' (did you mean 'wait'?)"],
    [locker.snatchTask('k', () => {}, { minHlod: 100 }), "unknown option 'minHlod' (did you mean 'minHold'?)"],
    [locker.lock('k', { fiar: true }), "unknown option 'fiar' (did you mean 'fair'?)"],
    [locker.semaphore('s', 2).acquire({ ttll: 100 }), "unknown option 'ttll' (did you mean 'ttl'?)"],
    [locker.history('n', { limt: 5 }), "unknown option 'limt' (did you mean 'limit'?)"],
    [locker.locks({ mtach: '*' }), "unknown option 'mtach' (did you mean 'match'?)"],
  ]
  for (const [call, message] of rejections) await expect(call).rejects.toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG', message })
  expect(() => locker.schedule('n', '* * * * *', () => {}, { timeZone: 'UTC' })).toThrow("unknown option 'timeZone' (did you mean 'timezone'?)")
  expect(() => locker.lead('n', () => {}, { retyr: 5 })).toThrow("unknown option 'retyr' (did you mean 'retry'?)")
  expect(() => require('../dashboard').createDashboard(locker, { action: true })).toThrow("unknown option 'action' (did you mean 'actions'?)")
  await locker.close()
})

describe("the binding's error contract", () => {
  const binding = require('../binding')
  const { CLASSES, fromNative } = require('../lib/errors')

  test('every ErrorClass the binding can name is an exported class of that name', () => {
    const names = Object.values(binding.ErrorClass)
    expect(names.length).toBe(7)
    for (const name of names) expect(CLASSES[name]?.name).toBe(name)
  })

  test('a call the binding refuses throws an Error whose code is its ErrorClass, converted by the facade', () => {
    let thrown
    try {
      new binding.NativeLocker({ urls: ['redis://127.0.0.1:1', 'redis://127.0.0.1:2'] }, () => {}, () => {})
    } catch (err) {
      thrown = err
    }
    expect(thrown.code).toBe(binding.ErrorClass.RangeError)
    expect(thrown.message).not.toMatch(/^\{/)
    const converted = fromNative(thrown)
    expect(converted).toBeInstanceOf(RangeError)
    expect(converted.code).toBe(INVALID)
    expect(converted.message).toBe(thrown.message)
  })
})

describe('Redis outages', () => {
  test('an unreachable Redis rejects ERR_SNATCH_REDIS within about commandTimeout, fn not run', async () => {
    const server = await startRedis()
    await server.kill()
    const locker = createLocker({ url: server.url, commandTimeout: 300 })
    let ran = false
    const started = Date.now()
    const err = await locker
      .snatchTask('down', () => {
        ran = true
      })
      .catch((e) => e)
    const elapsed = Date.now() - started
    expect(err).toBeInstanceOf(RedisError)
    expect(err).toBeInstanceOf(SnatchError)
    expect(err.code).toBe('ERR_SNATCH_REDIS')
    expect(err.cause).toBeInstanceOf(Error)
    // Said as what it is: the server could not be reached (not "a command failed").
    expect(err.message).toBe(`${server.url}: cannot connect: Connection refused (os error 111)`)
    expect(ran).toBe(false)
    // Bounded by the command timeout, not by a hidden multi-second reconnect loop.
    expect(elapsed).toBeLessThan(3000)
    await expect(locker.tryLock('down')).rejects.toMatchObject({ code: 'ERR_SNATCH_REDIS' })
    await expect(locker.withLock('down', () => 1, { wait: 5000 })).rejects.toMatchObject({ code: 'ERR_SNATCH_REDIS' })
    await locker.close()
  })

  test('a paused (unresponsive) Redis rejects ERR_SNATCH_REDIS and fn is not run', async () => {
    const server = await startRedis()
    const locker = createLocker({ url: server.url, commandTimeout: 200 })
    expect((await locker.snatchTask('warm', () => 1)).ran).toBe(true)
    // A waiting call goes over the locker's own connection (a one-attempt one may take the direct connection,
    // which direct.test.js covers).
    for (const call of [
      (fn) => locker.snatchTask('paused', fn),
      (fn) => locker.withLock('paused-waiting', fn, { wait: 100 }),
    ]) {
      const { err, ran } = await whilePaused(server, call)
      expect(err.code).toBe('ERR_SNATCH_REDIS')
      expect(err.cause.message).toMatch(/timed out/)
      expect(ran).toBe(false)
    }
    await locker.close()
    await server.stop()
  })

  test('after a Redis restart between calls, the next call works', async () => {
    const server = await startRedis()
    const locker = createLocker({ url: server.url })
    expect((await locker.snatchTask('before', () => 1)).ran).toBe(true)
    await server.restart()
    const after = await locker.snatchTask('after', () => 2)
    expect(after).toEqual({ ran: true, value: 2, fence: after.fence })
    expect(after.fence).toBeGreaterThanOrEqual(2n ** 50n) // an empty server: the counter starts from its clock
    await locker.close()
    await server.stop()
  })
})

describe('close()', () => {
  test('waits for running tasks, releases held locks, then rejects ERR_SNATCH_CLOSED', async () => {
    const locker = createLocker({ url: url() })
    const held = uniqueKey('closeheld')
    const running = uniqueKey('closerunning')
    const lock = await locker.tryLock(held, { autoExtend: true })
    let finished = false
    const task = locker.snatchTask(running, async () => {
      await new Promise((resolve) => setTimeout(resolve, 100))
      finished = true
      return 'finished'
    })
    await new Promise((resolve) => setTimeout(resolve, 20))
    await locker.close()
    expect(finished).toBe(true)
    expect((await task).value).toBe('finished')
    expect(await redisCommand(url(), 'EXISTS', `snatch:${held}`)).toBe(0)
    expect(lock.signal.aborted).toBe(true)
    await locker.close()
    for (const call of [
      () => locker.snatchTask('k', () => 1),
      () => locker.withLock('k', () => 1),
      () => locker.tryLock('k'),
      () => locker.lock('k'),
    ]) {
      const err = await call().catch((e) => e)
      expect(err).toBeInstanceOf(ClosedError)
      expect(err.code).toBe('ERR_SNATCH_CLOSED')
    }
  })
})
