'use strict'
// One pass over every Locker method against a deployment (a single server, a TLS server, a cluster, a Sentinel
// master, an ACL user), asserting what each must do there. Each deployment's test calls it with two lockers on that
// deployment and the plain redis:// URLs of its servers, on which it checks that a waiter was woken by the release
// (subscribed, and the release published) rather than by its retries.

const { redisCommand, commandCalls } = require('./redis-server')
const { uniqueKey, INSTANCE, sleep, until } = require('./util')

/** The sum over `nodes` of `read(node)`. */
async function sum(nodes, read) {
  const values = await Promise.all(nodes.map(read))
  return values.reduce((a, b) => a + b, 0)
}

/** PUBLISH and SPUBLISH calls so far on `node` (a cluster of Redis 7 or newer wakes waiters on sharded channels). */
async function publishes(node) {
  return (await commandCalls(node, 'publish')) + (await commandCalls(node, 'spublish'))
}

/** Subscribers of `channel` on `node`, plain or sharded (Redis 7 or newer). */
async function subscribers(node, channel) {
  const [, plain] = await redisCommand(node, 'PUBSUB', 'NUMSUB', channel)
  const sharded = await redisCommand(node, 'PUBSUB', 'SHARDNUMSUB', channel).catch(() => [channel, 0])
  return Number(plain) + Number(sharded[1])
}

/** The value of `key` on whichever of `nodes` holds it (the others answer MOVED, or do not have it). */
async function holderValue(nodes, key) {
  const values = await Promise.all(nodes.map((node) => redisCommand(node, 'GET', key).catch(() => null)))
  return values.find((value) => value !== null)
}

/**
 * Runs snatchTask, tryLock, lock, extend, release, withLock with a waiter woken by the release, a LockTimeoutError,
 * inspect, forceRelease, a semaphore (two permits, a waiter woken by a release), leader election, a schedule and the fleet's view and
 * control of it (schedules, history, suspend, resume, trigger) and of the locks held, on `locker` and `other` (two
 * lockers on one deployment, with the default prefix unless `prefix`), asserting each outcome. `nodes`: plain redis:// URLs (with credentials) of the deployment's servers.
 */
async function everyMethod({ locker, other, nodes, prefix = 'snatch:' }) {
  // snatchTask: runs once, and not while another holds the key.
  const key = uniqueKey('every')
  const ran = await locker.snatchTask(key, async (ctx) => ({ key: ctx.key, fence: ctx.fence }))
  expect(ran).toMatchObject({ ran: true, value: { key } })
  expect(ran.fence).toBeGreaterThan(0n)

  const held = await locker.tryLock(key)
  expect(held).not.toBeNull()
  expect(held.fence).toBeGreaterThan(ran.fence)
  let ranWhileHeld = false
  expect(await other.snatchTask(key, () => (ranWhileHeld = true))).toEqual({ ran: false })
  expect(ranWhileHeld).toBe(false)
  expect(await other.tryLock(key)).toBeNull()
  expect(await held.extend(20_000)).toBe(true)

  // withLock with wait: the waiter subscribes, the release publishes and wakes it.
  const channel = `{${prefix}${key}}:released`
  const publishedBefore = await sum(nodes, publishes)
  const waiter = other.withLock(key, async ({ fence }) => fence, { wait: 10_000 })
  await until(async () => (await sum(nodes, (node) => subscribers(node, channel))) > 0, 'the waiter to subscribe')
  // Once subscribed, the waiter marks the holder's token as waited for ('*'), which has the release publish.
  await until(async () => (await holderValue(nodes, `${prefix}${key}`))?.endsWith('*'), 'the waiter to mark the lock')
  expect(await held.release()).toBe(true)
  const waitedFence = await waiter
  expect(waitedFence).toBeGreaterThan(held.fence)
  expect(await sum(nodes, publishes)).toBeGreaterThan(publishedBefore)
  expect(await held.release()).toBe(false)

  // lock(): a Lock, released once; another waiting in vain gets LockTimeoutError.
  const lock = await locker.lock(key, { wait: 1000, ttl: 10_000 })
  expect(lock.fence).toBeGreaterThan(waitedFence)
  const timeout = await other.lock(key, { wait: 200 }).catch((e) => e)
  expect(timeout).toMatchObject({ code: 'ERR_SNATCH_TIMEOUT' })

  // inspect: what Redis holds; forceRelease: an operator deletes the lock, and the holder hears of it.
  const inspected = await other.inspect(key)
  expect(inspected).toEqual({ ttl: expect.any(Number), fence: expect.any(BigInt), holders: 1, holder: INSTANCE })
  // The counter: the holder's fence, raised by the attempts made since (the waiter's above).
  expect(inspected.fence).toBeGreaterThan(lock.fence)
  expect(inspected.ttl).toBeGreaterThan(0)
  expect(inspected.ttl).toBeLessThanOrEqual(10_000)
  expect(await other.forceRelease(key)).toBe(true)
  expect(await other.inspect(key)).toBeNull()
  expect(await other.forceRelease(key)).toBe(false)
  expect(await lock.extend()).toBe(false)
  expect(lock.signal.aborted).toBe(true)
  expect(await lock.release()).toBe(false)

  // semaphore: two permits across the two lockers, a third waits and is woken by a release (published).
  const semKey = uniqueKey('every-sem')
  const [mine, theirs] = [locker.semaphore(semKey, 2), other.semaphore(semKey, 2)]
  const permits = [await mine.tryAcquire({ ttl: 10_000 }), await theirs.tryAcquire({ ttl: 10_000 })]
  expect(permits).not.toContain(null)
  expect(permits[1].fence).toBeGreaterThan(permits[0].fence)
  expect(await theirs.tryAcquire()).toBeNull()
  const semChannel = `{${prefix}${semKey}}:released`
  const releasesBefore = await sum(nodes, publishes)
  const third = theirs.acquire({ wait: 10_000 })
  await until(async () => (await sum(nodes, (node) => subscribers(node, semChannel))) > 0, 'the permit waiter to subscribe')
  expect(await permits[0].release()).toBe(true)
  const woken = await third
  expect(woken.fence).toBeGreaterThan(permits[1].fence)
  expect(await sum(nodes, publishes)).toBeGreaterThan(releasesBefore)
  expect(await permits[1].extend(5_000)).toBe(true)
  await Promise.all([permits[1].release(), woken.release()])
  expect(await mine.withPermit(({ fence, key: k }) => [k, fence > woken.fence])).toEqual([semKey, true])

  await fairChecks({ locker, other, nodes, prefix })
  await readWriteChecks({ locker, other, nodes, prefix })
  await fleetChecks({ locker, other })
  await bufferChecks({ locker, other })
  await leaderChecks({ locker, other })
  await handOverChecks({ locker, other })
  await severalKeysChecks({ locker, other })
  await sharedChecks({ locker, other })
  await idempotencyChecks({ locker, other })
  await storedChecks({ locker, other })
}

/** redis-snatch/idempotency: an Express app on each locker; duplicates of a key run once, and are replayed. */
async function idempotencyChecks({ locker, other }) {
  const express = require('express')
  const { idempotency } = require('redis-snatch/idempotency')
  let runs = 0
  let answered = 0
  const servers = await Promise.all(
    [locker, other].map(async (l) => {
      const app = express()
      app.post('/pay', idempotency(l), async (req, res) => {
        runs++
        // The run goes on until the other request is answered (409); a second run, the bug, is let through to fail.
        await until(() => answered > 0, 'the other request to be answered').catch(() => {})
        res.status(201).send(`paid ${runs}`)
      })
      const server = app.listen(0, '127.0.0.1')
      await new Promise((resolve) => server.once('listening', resolve))
      return server
    }),
  )
  const key = uniqueKey('every-idempotency')
  const pay = (server) =>
    fetch(`http://127.0.0.1:${server.address().port}/pay`, { method: 'POST', headers: { 'idempotency-key': key } }).then(
      async (res) => [res.status, await res.text()],
    )
  const answers = await Promise.all(servers.map((server) => pay(server).then((answer) => (answered++, answer))))
  expect(answers.map(([status]) => status).sort()).toEqual([201, 409])
  expect(await pay(servers[1])).toEqual([201, 'paid 1'])
  expect(runs).toBe(1)
  servers.forEach((server) => server.close())
}

/** Shared results: one run for callers of both lockers, the stored value read by a later one, an error shared. */
async function sharedChecks({ locker, other }) {
  const key = uniqueKey('every-shared')
  let runs = 0
  const fn = async ({ fence }) => {
    runs++
    // A while, in which the other callers likely join this round; one that comes after it reads the stored value: one
    // run either way.
    await new Promise((resolve) => setTimeout(resolve, 100))
    return { fence, at: new Date(0) }
  }
  const values = await Promise.all([locker.shared(key, fn), other.shared(key, fn), other.shared(key, fn)])
  expect(runs).toBe(1)
  expect(values[1]).toEqual(values[0])
  expect(values[2]).toEqual(values[0])
  expect(await locker.shared(key, () => 'not run')).toEqual(values[0])
  const failing = uniqueKey('every-shared-error')
  const thrown = () => Promise.reject(Object.assign(new Error('nope'), { code: 'E_NOPE' }))
  await expect(other.shared(failing, thrown)).rejects.toMatchObject({ code: 'E_NOPE', message: 'nope' })
  expect(await locker.shared(failing, () => 'ran again')).toBe('ran again')
}

/**
 * Several keys at once: a set held by `locker` (one fence per key) keeps `other`'s set naming some of its keys in
 * another order waiting, which gets them all once it is released; withLocks runs fn under every key.
 */
async function severalKeysChecks({ locker, other }) {
  const keys = [uniqueKey('every-set-a'), uniqueKey('every-set-b'), uniqueKey('every-set-c')]
  const set = await locker.lockAll(keys, { ttl: 10_000, autoExtend: true })
  expect(set.fences).toHaveLength(3)
  expect(await other.tryLock(keys[1])).toBeNull()
  const waiter = other.lockAll([keys[2], keys[0]], { wait: 10_000 })
  expect(await set.extend(5_000)).toBe(true)
  expect(await set.release()).toBe(true)
  const next = await waiter
  expect(next.fences[1]).toBeGreaterThan(set.fences[0])
  expect(await next.release()).toBe(true)
  const ran = await locker.withLocks([keys[1], keys[0]], ({ fences, keys: held }) => [held, fences.length])
  expect(ran).toEqual([[keys[1], keys[0]], 2])
  expect(await locker.inspect(keys[0])).toBeNull()
}

/**
 * A lock handed over from `locker` to `other`: adopted with its fence, renewed and released there; the original can
 * no longer release it, and the handle cannot be adopted twice.
 */
async function handOverChecks({ locker, other }) {
  const key = uniqueKey('every-handoff')
  const held = await locker.lock(key, { ttl: 10_000, autoExtend: true })
  const handle = JSON.parse(JSON.stringify(held.handoff()))
  expect(handle).toMatchObject({ key, token: held.token, fence: String(held.fence) })
  expect(held.signal.aborted).toBe(true)
  const adopted = await other.adopt(handle, { ttl: 10_000 })
  expect(adopted.fence).toBe(held.fence)
  expect(await held.release()).toBe(false)
  await expect(locker.adopt(handle)).rejects.toMatchObject({ code: 'ERR_SNATCH_LOCK_LOST', reason: 'handoff' })
  expect(await locker.tryLock(key)).toBeNull()
  expect(await adopted.extend(5_000)).toBe(true)
  expect(await adopted.release()).toBe(true)
  expect(await locker.inspect(key)).toBeNull()
}

/**
 * Fair waiting between `locker` and `other`: two fair waiters queue (in Redis) in the order they came and get the
 * lock in that order; a fair one-attempt lock does not barge past them; a fair permit waiter is served.
 */
async function fairChecks({ locker, other, nodes, prefix }) {
  const key = uniqueKey('every-fair')
  const queue = `{${prefix}${key}}:queue`
  // The queue's length on the node that holds it (a replica holds a copy; other masters of a cluster answer MOVED).
  const length = (name) => Promise.all(nodes.map((n) => redisCommand(n, 'ZCARD', name).then(Number, () => 0)))
  const queued = (name = queue) => length(name).then((lengths) => Math.max(...lengths))
  const untilQueued = (n, name) => until(async () => (await queued(name)) === n, `${n} fair waiters to queue`)
  const held = await locker.tryLock(key, { ttl: 10_000 })
  const first = other.lock(key, { fair: true, wait: 10_000, ttl: 10_000 })
  await untilQueued(1)
  const second = locker.lock(key, { fair: true, wait: 10_000 })
  await untilQueued(2)
  expect(await other.lock(key, { fair: true, wait: 0 }).catch((e) => e.code)).toBe('ERR_SNATCH_TIMEOUT')
  expect(await held.release()).toBe(true)
  const firstLock = await first
  expect(firstLock.fence).toBeGreaterThan(held.fence)
  // The second still queues, behind no one now: the release of the first hands the lock over.
  await untilQueued(1)
  expect(await firstLock.release()).toBe(true)
  const secondLock = await second
  expect(secondLock.fence).toBeGreaterThan(firstLock.fence)
  expect(await secondLock.release()).toBe(true)
  await untilQueued(0)

  const permit = await other.semaphore(key + ':sem', 1).acquire({ fair: true, wait: 1000 })
  const next = locker.semaphore(key + ':sem', 1).acquire({ fair: true, wait: 10_000 })
  await untilQueued(1, `{${prefix}${key}:sem}:queue`)
  expect(await permit.release()).toBe(true)
  const nextPermit = await next
  expect(nextPermit.fence).toBeGreaterThan(permit.fence)
  expect(await nextPermit.release()).toBe(true)
}

/**
 * A read-write lock between `locker` and `other`: readers of both at once, no writer while they read; a writer that
 * waits is woken (published) when the last reader leaves, and keeps new readers out; fences rise across both sides.
 */
async function readWriteChecks({ locker, other, nodes, prefix }) {
  const key = uniqueKey('every-rw')
  const [mine, theirs] = [locker.rwlock(key), other.rwlock(key)]
  const readers = [await mine.tryRead({ ttl: 10_000 }), await theirs.tryRead({ ttl: 10_000 })]
  expect(readers).not.toContain(null)
  expect(readers[1].fence).toBeGreaterThan(readers[0].fence)
  expect(await theirs.tryWrite()).toBeNull()
  // Its waiters' channel is the writer key's: `{prefix+key:writer}:released`, on a cluster `{prefix+key}:writer:released`.
  const channels = [`{${prefix}${key}:writer}:released`, `{${prefix}${key}}:writer:released`]
  const waiting = (node) => Promise.all(channels.map((c) => subscribers(node, c))).then(([a, b]) => a + b)
  const writing = theirs.write({ wait: 10_000 })
  await until(async () => (await sum(nodes, waiting)) > 0, 'the writer to subscribe')
  // The waiting writer's mark (its first attempt made it) keeps new readers out.
  expect(await mine.tryRead()).toBeNull()
  await Promise.all(readers.map((r) => r.release()))
  const writer = await writing
  expect(writer.fence).toBeGreaterThan(readers[1].fence)
  expect(await mine.tryRead()).toBeNull()
  expect(await writer.extend(5_000)).toBe(true)
  expect(await writer.release()).toBe(true)
  expect(await mine.withRead(({ fence, key: k }) => [k, fence > writer.fence])).toEqual([key, true])
}

/**
 * Leader election between `locker` and `other`: one leads, an observer sees it, resign() hands over to the other with
 * a higher term, stop() ends both campaigns.
 */
async function leaderChecks({ locker, other }) {
  const name = uniqueKey('every-lead')
  const terms = []
  const lead = (l) =>
    l.lead(
      name,
      ({ term, signal }) => {
        terms.push(term)
        return new Promise((resolve) => signal.addEventListener('abort', resolve))
      },
      { ttl: 5_000, retry: 100 },
    )
  const observer = other.observe(name)
  const first = lead(locker)
  await until(() => first.isLeader, 'the first campaign to lead')
  const second = lead(other)
  await until(() => observer.leader === INSTANCE, 'the observer to see the leader')
  await first.resign()
  await until(() => second.isLeader, 'the other campaign to lead after the resign')
  expect(terms).toHaveLength(2)
  expect(terms[1]).toBeGreaterThan(terms[0])
  await Promise.all([first.stop(), second.stop()])
  observer.close()
  expect(first.isLeader || second.isLeader).toBe(false)
}

/**
 * A schedule on `locker` and `other` (two replicas: each occurrence runs on exactly one), and the fleet's view and
 * control of it from `other` (schedules, history, suspend, resume, trigger) and of the locks held (locks).
 */
async function fleetChecks({ locker, other }) {
  const name = uniqueKey('every-cron')
  const ticks = []
  const whys = []
  const tasks = [locker, other].map((l) =>
    l.schedule(name, '* * * * * *', ({ tick, why }) => {
      ticks.push(tick.getTime())
      whys.push(why)
    }),
  )
  const errors = []
  const skips = []
  for (const task of tasks) task.on('error', (err) => errors.push(err)).on('skip', ({ reason }) => skips.push(reason))
  await until(() => ticks.length >= 2, 'two occurrences to run')

  const info = (await other.schedules()).find((s) => s.name === name)
  expect(info).toMatchObject({ cron: '* * * * * *', timezone: 'UTC', replicas: [INSTANCE], suspended: false })
  expect(info.next).toBeInstanceOf(Date)
  const records = await other.history(name, { limit: 5 })
  expect(records.filter((r) => r.outcome === 'ok' && r.instance === INSTANCE).length).toBeGreaterThanOrEqual(1)
  await other.suspend(name)
  await until(() => skips.includes('suspended'), 'an occurrence skipped as suspended')
  expect((await other.schedules()).find((s) => s.name === name).suspended).toBe(true)
  await other.resume(name)
  const { tick } = await other.trigger(name)
  await until(() => whys.includes('manual'), 'the manual run')
  expect(ticks).toContain(tick.getTime())
  const lockKey = uniqueKey('every-held')
  const holding = await locker.tryLock(lockKey, { ttl: 10_000 })
  expect(await other.locks({ match: `${lockKey}*` })).toEqual([
    { key: lockKey, holder: INSTANCE, ttl: expect.any(Number), fence: holding.fence },
  ])
  await holding.release()

  await Promise.all(tasks.map((task) => task.stop()))
  expect(errors).toEqual([])
  expect(new Set(ticks).size).toBe(ticks.length)
}

/**
 * Stored schedules: runners of one handler on `locker` and `other`, schedules upserted, listed, read and removed from
 * `other`; each occurrence runs once, fences rising.
 */
async function storedChecks({ locker, other }) {
  const handler = uniqueKey('every-stored')
  const ids = [0, 1, 2].map((n) => `${handler}:${n}`)
  const runs = []
  const runners = [locker, other].map((l) => l.handle(handler, ({ id, tick, fence, data }) => void runs.push({ id, tick: tick.getTime(), fence, data })))
  for (const [n, id] of ids.entries()) await other.upsertSchedule(id, { handler, every: 1000, data: { n } })
  await until(() => ids.every((id) => runs.filter((r) => r.id === id).length >= 2), 'two runs of each stored schedule')
  const info = await other.getSchedule(ids[0])
  expect(info).toMatchObject({ id: ids[0], handler, every: 1000, data: { n: 0 }, health: 'ok' })
  expect(info.runners).toBeGreaterThanOrEqual(1)
  const first = await other.listSchedules({ handler, limit: 2 })
  const rest = await other.listSchedules({ handler, limit: 10, cursor: first.cursor })
  expect([...first.schedules, ...rest.schedules].map((s) => s.id).sort()).toEqual(ids)
  expect(await other.removeSchedule(ids[2])).toBe(true)
  const removed = runs.length
  await Promise.all(runners.map((runner) => runner.stop()))
  const fences = runs.filter((r) => r.id === ids[0]).map((r) => r.fence)
  for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1])
  expect(new Set(runs.map((r) => `${r.id}@${r.tick}`)).size).toBe(runs.length)
  expect(runs.slice(removed).filter((r) => r.id === ids[2])).toEqual([])
  for (const id of ids) await other.removeSchedule(id)
  expect(await other.getSchedule(ids[0])).toBeNull()
}

/**
 * A schedule with `concurrency: 'buffer'` and `jitter` on `locker` and `other` (two replicas), each attempt longer than
 * the period: one at a time, each occurrence once, one that was due while another ran waiting and running after it
 * (its buffer slot, beside the run lock: in its slot on a cluster).
 */
async function bufferChecks({ locker, other }) {
  const name = uniqueKey('every-buffer')
  const runs = []
  const tasks = [locker, other].map((l) =>
    l.schedule(name, '* * * * * *', async ({ tick }) => {
      const run = { tick: tick.getTime(), start: Date.now() }
      runs.push(run)
      await sleep(1300) // a run longer than the period: the next occurrence comes due while it runs
      run.end = Date.now()
    }, { concurrency: 'buffer', jitter: 200 }),
  )
  const errors = []
  for (const task of tasks) task.on('error', (err) => errors.push(err))
  await until(() => runs.filter((r) => r.end).length >= 3, 'three runs')
  await Promise.all(tasks.map((task) => task.stop()))
  expect(errors).toEqual([])
  expect(new Set(runs.map((r) => r.tick)).size).toBe(runs.length)
  for (let i = 1; i < runs.length; i++) expect(runs[i].start).toBeGreaterThanOrEqual(runs[i - 1].end)
  expect(runs.slice(1).some((r, i) => r.tick < runs[i].end)).toBe(true)
}

module.exports = { everyMethod, bufferChecks, storedChecks, fleetChecks, handOverChecks, severalKeysChecks, sharedChecks, idempotencyChecks, until, publishes, subscribers }
