'use strict'
// locker.contention(): the keys this process's waiting calls waited for most, from a bounded table in the core.

const { createLocker } = require('../..')
const { LIMITS } = require('../../lib/native')
const { uniqueKey, until } = require('../support/util')

const url = () => process.env.REDIS_URL

/** The error `promise` rejects with. */
const rejection = (promise) => promise.then(() => Promise.reject(new Error('expected a rejection')), (err) => err)

test('waits, total wait and timeouts per key, most waited for first; limit and reset', async () => {
  const locker = createLocker({ url: url() })
  const other = createLocker({ url: url() })
  const [hot, warm, free] = [uniqueKey('hot'), uniqueKey('warm'), uniqueKey('free')]
  try {
    expect(locker.contention()).toEqual([])
    // hot: held elsewhere, two waits that time out.
    const holder = await other.lock(hot)
    for (let i = 0; i < 2; i++) expect((await rejection(locker.withLock(hot, () => 1, { wait: 60 }))).code).toBe('ERR_SNATCH_TIMEOUT')
    // warm: one wait that gets the key once its holder releases it (a lock() and a withLocks() wait the same way).
    const warmHolder = await other.lock(warm)
    const waiting = locker.lock(warm, { wait: 10_000 })
    await until(async () => (await other.inspect(warm)) !== null, 'the holder')
    await warmHolder.release()
    await (await waiting).release()
    // free: got at once, not a wait; a one-attempt call on a held key is not one either.
    await locker.withLock(free, () => 1, { wait: 1000 })
    expect(await locker.tryLock(hot)).toBeNull()
    expect(await locker.snatchTask(hot, () => 1)).toEqual({ ran: false })

    const top = locker.contention()
    expect(top.map((c) => c.key)).toEqual([hot, warm])
    expect(top[0]).toMatchObject({ key: hot, waits: 2, timeouts: 2 })
    expect(top[0].waitMs).toBeGreaterThanOrEqual(120)
    expect(top[1]).toMatchObject({ key: warm, waits: 1, timeouts: 0 })
    expect(top[1].waitMs).toBeGreaterThan(0)
    // Another locker's waits are its own.
    expect(other.contention()).toEqual([])
    expect(locker.contention({ limit: 1 })).toEqual([top[0]])
    expect(locker.contention({ reset: true })).toEqual(top)
    expect(locker.contention()).toEqual([])
    await holder.release()
  } finally {
    await Promise.all([locker.close(), other.close()])
  }
})

test('bounded: many keys waited for keep at most LIMITS.contentionKeys, and the key waited for most stays', async () => {
  const locker = createLocker({ url: url() })
  const other = createLocker({ url: url() })
  try {
    const hot = uniqueKey('hot')
    const held = await other.lock(hot)
    await rejection(locker.withLock(hot, () => 1, { wait: 300 }))
    const keys = Array.from({ length: LIMITS.contentionKeys + 50 }, () => uniqueKey('cold'))
    const holders = await Promise.all(keys.map((key) => other.lock(key)))
    await Promise.all(keys.map((key) => rejection(locker.lock(key, { wait: 5 }))))
    const all = locker.contention({ limit: 10_000 })
    expect(all).toHaveLength(LIMITS.contentionKeys)
    expect(all[0]).toMatchObject({ key: hot, waits: 1, timeouts: 1 })
    await Promise.all([held, ...holders].map((lock) => lock.release()))
  } finally {
    await Promise.all([locker.close(), other.close()])
  }
})

test('bad options are ERR_SNATCH_INVALID_ARG', () => {
  const locker = createLocker({ url: url() })
  expect(() => locker.contention({ limit: 0 })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  expect(() => locker.contention({ reset: 'yes' })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  expect(() => locker.contention({ limt: 1 })).toThrow(/did you mean 'limit'/)
  return locker.close()
})
