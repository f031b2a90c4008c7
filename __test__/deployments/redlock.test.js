'use strict'

const { createLocker, QuorumError, LockLostError } = require('../..')
const { startRedis, redisCommand, freePort } = require('../support/redis-server')
const { bufferChecks, fleetChecks, handOverChecks, severalKeysChecks } = require('../support/every-method')
const { uniqueKey, heldBy, until } = require('../support/util')

let servers

beforeEach(async () => {
  servers = await Promise.all([startRedis(), startRedis(), startRedis()])
})
afterEach(() => Promise.all(servers.map((s) => s.stop())))

const urls = () => servers.map((s) => s.url)

test('snatchTask, withLock, tryLock, extend, release and fences work over a majority', async () => {
  const locker = createLocker({ urls: urls() })
  const key = uniqueKey('basic')
  const r = await locker.snatchTask(key, ({ fence }) => fence)
  expect(r).toEqual({ ran: true, value: r.fence, fence: expect.any(BigInt) })
  const lock = await locker.tryLock(key, { ttl: 5000 })
  expect(lock.fence > r.fence).toBe(true)
  for (const s of servers) expect(await redisCommand(s.url, 'GET', `snatch:${key}`)).toBe(heldBy(lock))
  expect(await locker.tryLock(key)).toBeNull()
  expect(lock.validUntil).toBeLessThanOrEqual(Date.now() + 5000 - 50)
  expect(await lock.extend(10_000)).toBe(true)
  expect(await lock.release()).toBe(true)
  for (const s of servers) expect(await redisCommand(s.url, 'EXISTS', `snatch:${key}`)).toBe(0)
  expect(await locker.withLock(key, () => 'ok', { wait: 1000 })).toBe('ok')
  await locker.close()
})

test('one node of three killed: still works; two killed: QuorumError, fn not run', async () => {
  const locker = createLocker({ urls: urls(), commandTimeout: 300 })
  await servers[0].kill()
  expect((await locker.snatchTask(uniqueKey('one'), () => 1)).ran).toBe(true)
  await servers[1].kill()
  let ran = false
  const err = await locker
    .snatchTask(uniqueKey('two'), () => {
      ran = true
    })
    .catch((e) => e)
  expect(err).toBeInstanceOf(QuorumError)
  expect(err.code).toBe('ERR_SNATCH_QUORUM')
  expect(err.message).toContain(String(servers[0].port))
  expect(ran).toBe(false)
  await locker.close()
})

test('losing the majority mid-run aborts the signal and rejects LOCK_LOST', async () => {
  const locker = createLocker({ urls: urls(), commandTimeout: 200 })
  const key = uniqueKey('lost')
  const err = await locker
    .snatchTask(
      key,
      async ({ signal }) => {
        await servers[0].kill()
        await servers[1].kill()
        await new Promise((resolve) => signal.addEventListener('abort', resolve))
        return 'saw abort'
      },
      { ttl: 600 },
    )
    .catch((e) => e)
  expect(err).toBeInstanceOf(LockLostError)
  expect(err.value).toBe('saw abort')
  await locker.close()
})

test('several keys, and a lock handed over, over a majority (adopted with one node down too)', async () => {
  const [a, b] = [createLocker({ urls: urls(), commandTimeout: 300 }), createLocker({ urls: urls(), commandTimeout: 300 })]
  await handOverChecks({ locker: a, other: b })
  await severalKeysChecks({ locker: a, other: b })
  const key = uniqueKey('handoff-down')
  const held = await a.lock(key, { ttl: 10_000 })
  await servers[2].kill()
  const adopted = await b.adopt(held.handoff())
  expect(adopted.fence).toBe(held.fence)
  for (const s of servers.slice(0, 2)) expect(await redisCommand(s.url, 'GET', `snatch:${key}`)).toBe(heldBy(adopted))
  expect(await adopted.release()).toBe(true)
  await Promise.all([a.close(), b.close()])
})

test('urls must be an odd number of at least three', () => {
  for (const list of [[], [servers[0].url], [servers[0].url, servers[1].url], [...urls(), servers[0].url]]) {
    expect(() => createLocker({ urls: list })).toThrow(RangeError)
    expect(() => createLocker({ urls: list })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  }
})

test('schedule() works over a Redlock set', async () => {
  const locker = createLocker({ urls: urls() })
  const name = uniqueKey('schedule')
  const task = locker.schedule(name, '*/1 * * * * *', ({ tick }) => tick.getTime())
  const run = await new Promise((resolve) => task.once('run', resolve))
  await locker.close()
  expect(typeof run.fence).toBe('bigint')
  // Every node keeps the record of the run.
  for (const s of servers) {
    const records = await redisCommand(s.url, 'HGETALL', `{snatch:${name}}:records`)
    expect(JSON.parse(records[1])).toMatchObject({ tick: run.tick.getTime(), outcome: 'ok', fence: String(run.fence) })
  }
})

test("the fleet's schedules, records, suspend, resume, trigger and locks over a Redlock set", async () => {
  const [locker, other] = [createLocker({ urls: urls() }), createLocker({ urls: urls() })]
  await fleetChecks({ locker, other })
  await bufferChecks({ locker, other })
  await Promise.all([locker.close(), other.close()])
})

test('three lockers scheduling one job over Redlock: every occurrence runs exactly once', async () => {
  // The three claim each occurrence at the same moment, so the nodes' votes often split between them; the split
  // rounds are tried again rather than every locker reporting the occurrence as taken.
  const lockers = [0, 1, 2].map(() => createLocker({ urls: urls() }))
  const name = uniqueKey('split')
  const outcomes = new Map() // occurrence (ms) -> 'run' / 'skip' of each locker
  const complete = () => [...outcomes.values()].filter((seen) => seen.length === lockers.length)
  await new Promise((resolve, reject) => {
    for (const locker of lockers) {
      const task = locker.schedule(name, '*/1 * * * * *', () => {})
      const record = (what) => ({ tick }) => {
        outcomes.set(tick.getTime(), [...(outcomes.get(tick.getTime()) ?? []), what])
        if (complete().length === 4) resolve()
      }
      task.on('run', record('run'))
      task.on('skip', record('skip'))
      task.on('error', reject)
    }
  })
  await Promise.all(lockers.map((l) => l.close()))
  for (const seen of complete()) expect(seen.filter((what) => what === 'run')).toHaveLength(1)
})

// Found by the API fuzz (api/fuzz.test.js).
// Closing a Redlock locker while an acquisition failed (no majority: two of three nodes down) could leave that
// acquisition's key on the node that granted it, until its ttl (10 minutes here; up to 24.8 days with
// ttl 2 ** 31 - 1): the failed round removed our token in a background task that close() did not wait for (seen in
// about 1 of 10 tries). Background releases are now tracked (crates/core/src/lock/cleanup.rs) and close() waits for them.
test('closing a Redlock locker while a failed acquisition cleans up leaves no lock key', async () => {
  const dead = [`redis://127.0.0.1:${await freePort()}`, `redis://127.0.0.1:${await freePort()}`]
  const left = []
  for (let n = 0; n < 60 && left.length === 0; n++) {
    const prefix = `${uniqueKey('redlock-close')}:${n}:`
    const redlock = createLocker({ urls: [servers[0].url, ...dead], prefix, commandTimeout: 100 })
    const attempt = redlock.tryLock('k', { ttl: 600_000 }).catch((e) => e)
    await redlock.close()
    // Closed at once: the acquisition fails for want of a majority, or gives up for the close.
    expect(['ERR_SNATCH_QUORUM', 'ERR_SNATCH_CLOSED']).toContain((await attempt).code)
    // Gone at once, or within a moment; a key left would stay 10 minutes.
    const gone = async () => (await redisCommand(servers[0].url, 'PTTL', `${prefix}k`)) === -2
    const kept = await until(gone, 'the key to go', 2000).then(() => false, () => true)
    if (kept) {
      left.push(`${prefix}k`)
      await redisCommand(servers[0].url, 'DEL', `${prefix}k`)
    }
  }
  expect(left).toEqual([])
})
