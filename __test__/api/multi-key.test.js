'use strict'
// Several keys at once (withLocks / lockAll): 4 processes lock random pairs of 10 keys, named in random order, for
// 20 s (SNATCH_MULTI_KEY_SECONDS), on one Redis and on a 6-node cluster: no deadlock (sections end every second), no
// two holders of a key act at once and fences rise per key (the chaos suite's audit). And the set's contract: all or
// none, one fence per key, renewed together, a lost key aborts the set.

const { fork } = require('node:child_process')
const { once } = require('node:events')
const path = require('node:path')
const { createLocker, LockTimeoutError, MultiLock } = require('../..')
const { check } = require('../../chaos/checker')
const { startCluster } = require('../support/deployments')
const { uniqueKey, sleep } = require('../support/util')

const SECONDS = Number(process.env.SNATCH_MULTI_KEY_SECONDS ?? 20)
jest.setTimeout((SECONDS + 60) * 1000)

/** Runs 4 workers on `locker` options; resolves their sections (ns) and errors. */
async function fourWorkers(lockerOptions) {
  const sections = []
  const errors = {}
  const workers = Array.from({ length: 4 }, () =>
    fork(path.join(__dirname, '..', 'support', 'workers', 'multi-key-worker.js'), {
      env: { ...process.env, LOCKER: JSON.stringify(lockerOptions), KEYS: '10', SECONDS: String(SECONDS) },
    }),
  )
  await Promise.all(
    workers.map(async (worker, w) => {
      worker.on('message', (m) => {
        for (const s of m.sections ?? []) {
          sections.push({ worker: w, key: s.key, fence: BigInt(s.fence), enter: BigInt(s.enter), last: BigInt(s.last) })
        }
        for (const [code, n] of Object.entries(m.errors ?? {})) errors[code] = (errors[code] ?? 0) + n
      })
      const [code] = await once(worker, 'exit')
      expect(code).toBe(0)
    }),
  )
  return { sections, errors }
}

/** The audit: no overlap, fences rising per key, and sections ending in every second of the run. */
function audit({ sections, errors }) {
  expect(sections.length).toBeGreaterThan(SECONDS * 10)
  const result = check(sections)
  expect(result).toMatchObject({ overlaps: 0, fenceViolations: 0 })
  const start = sections.reduce((a, s) => (s.enter < a ? s.enter : a), sections[0].enter)
  const seconds = new Set(sections.map((s) => Number((s.last - start) / 1_000_000_000n)))
  const stalled = Array.from({ length: SECONDS - 1 }, (_, i) => i).filter((i) => !seconds.has(i))
  expect(stalled).toEqual([])
  expect(errors).toEqual({})
  console.log(`${sections.length / 2} sets held over ${SECONDS} s by 4 processes: 0 overlaps, every second had sections`)
}

test('4 processes, random pairs of 10 keys in random order, one Redis: no deadlock, no overlap', async () => {
  audit(await fourWorkers({ url: process.env.REDIS_URL, prefix: `${uniqueKey('multi')}:` }))
})

describe('on a 6-node cluster', () => {
  let cluster
  beforeAll(async () => {
    cluster = await startCluster()
  }, 60_000)
  afterAll(() => cluster?.stop())

  test('4 processes, random pairs of 10 keys in random order (in several slots): no deadlock, no overlap', async () => {
    audit(await fourWorkers({ cluster: cluster.seeds.slice(0, 2), prefix: `${uniqueKey('multi')}:` }))
  })
})

describe('the set', () => {
  let a, b
  beforeAll(() => {
    a = createLocker({ url: process.env.REDIS_URL })
    b = createLocker({ url: process.env.REDIS_URL })
  })
  afterAll(() => Promise.all([a.close(), b.close()]))

  test('all or none: a set that cannot have one key in time holds none, and names the key', async () => {
    const [x, y, z] = [uniqueKey('x'), uniqueKey('y'), uniqueKey('z')]
    const held = await a.lock(y, { ttl: 10_000 })
    const err = await b.lockAll([z, y, x], { wait: 100 }).catch((e) => e)
    expect(err).toBeInstanceOf(LockTimeoutError)
    expect(err.message).toContain(y)
    expect(await Promise.all([a.inspect(x), a.inspect(z)])).toEqual([null, null])
    await held.release()
    const set = await b.lockAll([z, y, x])
    expect(set).toBeInstanceOf(MultiLock)
    expect(set.keys).toEqual([z, y, x])
    expect(set.fences.every((f) => f > held.fence)).toBe(true)
    expect(await a.tryLock(x)).toBeNull()
    expect(await set.release()).toBe(true)
    expect(await Promise.all([a.inspect(x), a.inspect(y), a.inspect(z)])).toEqual([null, null, null])
  })

  test('renewed together while held; losing one key aborts the set, and withLocks rejects LockLostError', async () => {
    const [x, y] = [uniqueKey('x'), uniqueKey('y')]
    const set = await a.lockAll([x, y], { ttl: 300, autoExtend: true })
    await sleep(800) // time passes: over two ttls, which only the renewals cover
    expect(set.signal.aborted).toBe(false)
    expect((await a.inspect(x)).ttl).toBeGreaterThan(0)
    expect(await set.extend(5000)).toBe(true)
    expect(await set.release()).toBe(true)

    const err = await a
      .withLocks([y, x], async ({ signal, fences, keys }) => {
        expect(keys).toEqual([y, x])
        expect(fences).toHaveLength(2)
        await b.forceRelease(x)
        await once(signal, 'abort')
        return 'acted'
      }, { ttl: 600 })
      .catch((e) => e)
    expect(err).toMatchObject({ code: 'ERR_SNATCH_LOCK_LOST', value: 'acted' })
    expect(await a.inspect(y)).toBeNull()
  })

  test('bad sets are refused at once', async () => {
    for (const keys of [[], 'k', [1], ['k', 'k'], Array.from({ length: 1025 }, (_, i) => `k${i}`)]) {
      await expect(a.lockAll(keys)).rejects.toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG' })
    }
    await expect(a.withLocks(['k'], 'not a function')).rejects.toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG' })
  })
})
