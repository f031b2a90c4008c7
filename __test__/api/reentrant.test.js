'use strict'
// A call inside the fn of a run that holds its key (reentrancy, issue 67): a waiting call never waits for itself.

const { fork } = require('node:child_process')
const path = require('node:path')
const { createLocker, LockLostError, LockTimeoutError, ReentrantError, SnatchError } = require('../..')
const { uniqueKey, until } = require('../support/util')

const url = () => process.env.REDIS_URL

let locker
beforeAll(() => {
  locker = createLocker({ url: url() })
})
afterAll(() => locker.close())

/** The error `promise` rejects with. */
const rejection = (promise) =>
  promise.then(
    (value) => {
      throw new Error(`expected a rejection, got ${JSON.stringify(value)}`)
    },
    (err) => err,
  )

/** Expects `err` to be the ReentrantError of `key`. */
function expectReentrant(err, key) {
  expect(err).toBeInstanceOf(ReentrantError)
  expect(err).toBeInstanceOf(SnatchError)
  expect(err.code).toBe('ERR_SNATCH_REENTRANT')
  expect(err.key).toBe(key)
  expect(err.message).toContain(`'${key}'`)
}

/** A promise and its resolver. */
function gate() {
  let open
  const opened = new Promise((resolve) => (open = resolve))
  return { opened, open }
}

describe('a waiting call on a key held by its calling context', () => {
  // A wait longer than the test's own timeout: a call that waited for itself would fail the test.
  const wait = 60_000

  test('after more runs than lib/context.js makes its table of held keys anew for, a held key is still found', async () => {
    // REMAKE_HELD (4096) runs end with their key deleted from the table: it is made anew meanwhile, with the key
    // held throughout still in it.
    const key = uniqueKey('re-remade')
    const errors = await locker.withLock(key, async () => {
      const others = Array.from({ length: 50 }, (_, i) => uniqueKey(`re-remade-${i}`))
      for (let round = 0; round < 84; round++) await Promise.all(others.map((other) => locker.snatchTask(other, () => {})))
      return [await rejection(locker.withLock(key, () => 'inner', { wait }))]
    })
    for (const err of errors) expectReentrant(err, key)
  })

  test('withLock, lock and withLocks inside withLock reject ReentrantError at once, naming the key', async () => {
    const key = uniqueKey('re')
    const other = uniqueKey('re-other')
    const errors = await locker.withLock(key, async () => [
      await rejection(locker.withLock(key, () => 'inner', { wait })),
      await rejection(locker.lock(key, { wait })),
      await rejection(locker.withLocks([other, key], () => 'inner', { wait })),
      await rejection(locker.lockAll([other, key], { wait })),
    ])
    for (const err of errors) expectReentrant(err, key)
    // Nothing was taken by the refused calls: the other key is free, and the key is free once the run ended.
    expect(await locker.inspect(other)).toBeNull()
    expect(await locker.inspect(key)).toBeNull()
  })

  test('inside snatchTask, withLocks and a nested run of another key, through helpers, Promise.all and then', async () => {
    const key = uniqueKey('re')
    const outer = uniqueKey('re-outer')
    const helper = async () => {
      await null
      return rejection(locker.withLock(key, () => 1, { wait }))
    }
    const got = await locker.snatchTask(key, () =>
      locker.withLock(outer, async () => {
        const [a, b] = await Promise.all([helper(), helper()])
        const c = await Promise.resolve().then(() => rejection(locker.lock(key, { wait })))
        return [a, b, c]
      }),
    )
    expect(got.ran).toBe(true)
    for (const err of got.value) expectReentrant(err, key)
    const fromSet = await locker.withLocks([outer, key], () => rejection(locker.withLock(key, () => 1, { wait })))
    expectReentrant(fromSet, key)
    // In the synchronous start of a fn of a run started inside the holder's fn.
    const throughRun = await locker.withLock(key, () => locker.withLock(outer, () => rejection(locker.lock(key, { wait }))))
    expectReentrant(throughRun, key)
  })

  test('one-attempt calls keep their answers: snatchTask { ran: false }, tryLock null', async () => {
    const key = uniqueKey('re')
    const [task, lock] = await locker.withLock(key, async () => [
      await locker.snatchTask(key, () => 'inner'),
      await locker.tryLock(key),
    ])
    expect(task).toEqual({ ran: false })
    expect(lock).toBeNull()
  })

  test('a call from outside the holding run still waits for it (another call of this process, not inside it)', async () => {
    const key = uniqueKey('re')
    const held = gate()
    const started = gate()
    const first = locker.withLock(key, async () => {
      started.open()
      await held.opened
      return 'first'
    })
    await started.opened
    // Inside a run of another key, concurrent with the holder: it waits, then runs.
    const second = locker.withLock(uniqueKey('re-b'), () => locker.withLock(key, () => 'second', { wait }))
    let secondDone = false
    second.then(() => (secondDone = true))
    await until(async () => (await locker.inspect(key)) !== null, 'the key held')
    expect(secondDone).toBe(false)
    held.open()
    expect(await first).toBe('first')
    expect(await second).toBe('second')
  })

  test('another locker of this process is not the calling context: it waits (and times out)', async () => {
    const key = uniqueKey('re')
    const other = createLocker({ url: url() })
    try {
      const err = await locker.withLock(key, () => rejection(other.withLock(key, () => 1, { wait: 50 })))
      expect(err).toBeInstanceOf(LockTimeoutError)
    } finally {
      await other.close()
    }
  })
})

describe('reentrant: true', () => {
  test('withLock and snatchTask run under the held lock: same fence, nothing released until the outer call ends', async () => {
    const key = uniqueKey('re')
    const outer = await locker.withLock(key, async (ctx) => {
      const before = await locker.inspect(key)
      const inner = await locker.withLock(key, (inner) => ({ fence: inner.fence, key: inner.key }), { reentrant: true, wait: 10 })
      const task = await locker.snatchTask(key, (c) => c.fence, { reentrant: true })
      const twice = await locker.withLock(key, () => locker.withLock(key, (c) => c.fence, { reentrant: true }), { reentrant: true })
      const after = await locker.inspect(key)
      return { fence: ctx.fence, inner, task, twice, before, after }
    })
    expect(outer.inner).toEqual({ fence: outer.fence, key })
    expect(outer.task).toEqual({ ran: true, value: outer.fence, fence: outer.fence })
    expect(outer.twice).toBe(outer.fence)
    // Still the outer's lock, with its fence, after the nested runs ended.
    expect(outer.after.holder).toBe(outer.before.holder)
    expect(outer.after.fence).toBe(outer.before.fence)
    expect(await locker.inspect(key)).toBeNull()
  })

  test("a nested run not awaited keeps the outer's lock until it ends", async () => {
    const key = uniqueKey('re')
    const inner = gate()
    const innerStarted = gate()
    let nested
    let outerEnded = false
    const outer = locker
      .withLock(key, () => {
        nested = locker.withLock(key, async () => {
          innerStarted.open()
          await inner.opened
          return 'nested'
        }, { reentrant: true })
        return 'outer'
      })
      .then((value) => {
        outerEnded = true
        return value
      })
    await innerStarted.opened
    // The outer fn returned; its run has not ended, and the key is still held.
    await new Promise((resolve) => setImmediate(resolve))
    expect(outerEnded).toBe(false)
    expect(await locker.inspect(key)).not.toBeNull()
    inner.open()
    expect(await nested).toBe('nested')
    expect(await outer).toBe('outer')
    expect(await locker.inspect(key)).toBeNull()
  })

  test('withLocks re-enters only when every key is held; a mixed set is refused', async () => {
    const [a, b, c] = [uniqueKey('re-a'), uniqueKey('re-b'), uniqueKey('re-c')]
    const got = await locker.withLocks([a, b], async ({ fences }) => {
      const nested = await locker.withLocks([b, a], (ctx) => ctx.fences, { reentrant: true })
      const inOne = await locker.withLock(a, (ctx) => ctx.fence, { reentrant: true })
      const mixed = await rejection(locker.withLocks([a, c], () => 1, { reentrant: true }))
      return { fences, nested, inOne, mixed }
    })
    expect(got.nested).toEqual([got.fences[1], got.fences[0]])
    expect(got.inOne).toBe(got.fences[0])
    expectReentrant(got.mixed, a)
    expect(got.mixed.message).toContain('deadlock')
    expect(await locker.inspect(c)).toBeNull()
  })

  test('lock() never re-enters (its release would give back the outer lock): refused', async () => {
    const key = uniqueKey('re')
    const err = await locker.withLock(key, () => rejection(locker.lock(key, { reentrant: true })))
    expectReentrant(err, key)
  })

  test('a lost lease is told to the runs nested in it', async () => {
    const key = uniqueKey('re')
    const err = await rejection(
      locker.withLock(
        key,
        () =>
          locker.withLock(
            key,
            async ({ signal }) => {
              await locker.forceRelease(key)
              await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
              return signal.reason
            },
            { reentrant: true },
          ),
        { ttl: 300 },
      ),
    )
    // The nested run's fn saw the loss; the outer call rejects it.
    expect(err).toBeInstanceOf(LockLostError)
  })
})

describe('across processes', () => {
  /** A process holding `key` until it is killed. */
  async function holder(key) {
    const code = `
      const { createLocker } = require('.')
      const locker = createLocker({ url: process.env.REDIS_URL })
      locker.lock(${JSON.stringify(key)}, { autoExtend: true }).then(() => process.send('held'))`
    const child = fork('-e', [code], { env: process.env, cwd: path.join(__dirname, '..', '..') })
    await new Promise((resolve, reject) => {
      child.once('message', resolve)
      child.once('error', reject)
    })
    return child
  }

  test('a key another process holds still makes the call wait, reentrant or not, inside a run of this process', async () => {
    const key = uniqueKey('re')
    const child = await holder(key)
    try {
      const errors = await locker.withLock(uniqueKey('re-outer'), async () => [
        await rejection(locker.withLock(key, () => 1, { wait: 100 })),
        await rejection(locker.withLock(key, () => 1, { wait: 100, reentrant: true })),
        await rejection(locker.lock(key, { wait: 100 })),
      ])
      for (const err of errors) expect(err).toBeInstanceOf(LockTimeoutError)
      expect(await locker.snatchTask(key, () => 1, { reentrant: true })).toEqual({ ran: false })
    } finally {
      child.kill()
    }
  })
})
