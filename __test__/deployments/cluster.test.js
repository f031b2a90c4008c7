'use strict'
// Redis Cluster: a 6-node cluster (3 masters, 3 replicas) made with redis-cli --cluster create, then every method,
// keys with their own hash tags, a node added and a slot migrated while locking (ASK, then MOVED), and a master
// failover.

const Redis = require('ioredis')
const { createCluster } = require('redis')
const { createLocker } = require('../..')
const { redisCommand, commandCalls } = require('../support/redis-server')
const { startCluster, replicasCaughtUp, waitFor, redisServerMajor } = require('../support/deployments')
const { createSnatchUser, aclDenials } = require('../support/acl')
const { everyMethod } = require('../support/every-method')
const { twoReplicas } = require('../support/nest-app')
const { uniqueKey } = require('../support/util')

const COMMAND_TIMEOUT = 1000
const USER_PASSWORD = 'cluster-user-secret'

let cluster
const lockers = []

/** A locker on the cluster, closed after the suite. */
function locker(options = {}) {
  const made = createLocker({ cluster: cluster.seeds.slice(0, 2), commandTimeout: COMMAND_TIMEOUT, ...options })
  lockers.push(made)
  return made
}

/** The servers' major version: Redis 6.2 has no direct connection and no sharded pub/sub. */
const major = redisServerMajor()
/** A test of the direct connection, which needs Redis 7 or newer. */
const testFrom7 = major >= 7 ? test : test.skip

beforeAll(async () => {
  cluster = await startCluster()
}, 60_000)

afterAll(async () => {
  await Promise.all(lockers.map((l) => l.close()))
  await cluster?.stop()
})

test('every method works on the cluster (seed nodes; the rest discovered), as the docs\' minimal ACL user', async () => {
  await createSnatchUser(cluster.urls, USER_PASSWORD)
  const user = { username: 'snatch', password: USER_PASSWORD }
  await everyMethod({ locker: locker(user), other: locker(user), nodes: cluster.urls })
  expect(await aclDenials(cluster.urls)).toEqual([])
})

/** Direct connections on `node` (a cluster node handle), from any locker. */
async function directClients(node) {
  const clients = await redisCommand(node.inspectUrl, 'CLIENT', 'LIST')
  return clients.split('\n').filter((line) => line.includes('name=redis-snatch-direct')).length
}

testFrom7('one-attempt calls and releases go to each key\'s master over a direct connection of its own', async () => {
  const masters = await cluster.masters()
  const before = await Promise.all(masters.map(directClients))
  const l = locker()
  const keys = Array.from({ length: 60 }, (_, i) => uniqueKey(`direct-${i}`))
  for (let round = 0; round < 3; round++) {
    const ran = await Promise.all(keys.map((key) => l.snatchTask(key, ({ fence }) => fence)))
    expect(ran.every((r) => r.ran)).toBe(true)
  }
  // The slot map comes first (the first calls take the main connection), then a socket per master opens.
  await waitFor('a direct connection on every master', async () => {
    await Promise.all(keys.map((key) => l.snatchTask(key, () => 1)))
    const after = await Promise.all(masters.map(directClients))
    return after.every((n, i) => n === before[i] + 1)
  })
  const lock = await l.tryLock(keys[0])
  expect(lock).not.toBeNull()
  expect(await lock.release()).toBe(true)
})

test("a lock's fence counter (its prefix's in the lock's slot) shares the lock's slot, also with a prefix that is a hash tag", async () => {
  const glob = (text) => text.replace(/[{}*?[\]\\]/g, '\\$&')
  for (const [prefix, key] of [
    ['snatch:', uniqueKey('slot')],
    ['{app}:', uniqueKey('slot')],
    ['snatch:', `${uniqueKey('slot')}{tag}`],
  ]) {
    const l = locker({ prefix })
    const lock = await l.tryLock(key)
    expect(lock).not.toBeNull()
    const master = await cluster.masterOf(prefix + key)
    const slot = await cluster.slotOf(prefix + key)
    // `{app}::fence` for a prefix with a hash tag, else `{snatch:<letters>}:fence`, one per slot.
    const pattern = prefix.startsWith('{') ? `${glob(prefix)}:fence` : `{${glob(prefix)}*}:fence`
    const counters = await redisCommand(master.inspectUrl, 'KEYS', pattern)
    const slots = await Promise.all(counters.map((name) => cluster.slotOf(name)))
    const counter = counters[slots.indexOf(slot)]
    expect(counter).toBeDefined()
    expect(BigInt(await redisCommand(master.inspectUrl, 'GET', counter))).toBeGreaterThanOrEqual(lock.fence)
    expect(await lock.release()).toBe(true)
  }
})

// Wake-ups on sharded channels (Redis 7+): a release SPUBLISHes on the channel of the lock's slot, which reaches that
// shard only, where PUBLISH would cross the cluster bus to every node. Redis 6.2 keeps PUBLISH and SUBSCRIBE.
const lockOf = (l, key) => ({ take: () => l.tryLock(key), wait: () => l.lock(key, { wait: 30_000 }) })
const permitOf = (l, key) => ({ take: () => l.semaphore(key, 1).tryAcquire(), wait: () => l.semaphore(key, 1).acquire({ wait: 30_000 }) })
test.each([
  ['a lock released', 'snatch:', lockOf, (lock) => lock.release()],
  ['a lock released, under a prefix that is a hash tag', '{app}:', lockOf, (lock) => lock.release()],
  ['a lock force-released', 'snatch:', lockOf, (_lock, l, key) => l.forceRelease(key)],
  ['a permit released', 'snatch:', permitOf, (permit) => permit.release()],
])('%s wakes its waiter on the sharded channel of its slot, with no PUBLISH (6.2: by PUBLISH)', async (_name, prefix, kind, give) => {
  const masters = await cluster.masters()
  const sum = async (each) => (await Promise.all(masters.map(each))).reduce((a, b) => a + b)
  const published = () => sum((m) => commandCalls(m.inspectUrl, 'publish'))
  const publishedBefore = await published()
  const [holder, waiting] = [locker({ prefix }), locker({ prefix })]
  const key = uniqueKey('sharded')
  const master = await cluster.masterOf(prefix + key)
  const channel = prefix.startsWith('{') ? `${prefix}${key}:released` : `{${prefix}${key}}:released`
  expect(await cluster.slotOf(channel)).toBe(await cluster.slotOf(prefix + key))
  const held = await kind(holder, key).take()
  expect(held).not.toBeNull()
  const waiter = kind(waiting, key).wait()
  // A lock's release publishes once a waiter marked it waited for; a permit's always does.
  await waitFor('the waiter subscribed on the lock\'s master (and marked a lock waited for)', async () => {
    const [, subscribers] =
      major >= 7
        ? await redisCommand(master.inspectUrl, 'PUBSUB', 'SHARDNUMSUB', channel)
        : [channel, await sum(async (m) => (await redisCommand(m.inspectUrl, 'PUBSUB', 'NUMSUB', channel))[1])]
    const marked = kind === permitOf || (await redisCommand(master.inspectUrl, 'GET', prefix + key))?.endsWith('*')
    return subscribers === 1 && marked
  })
  const spublished = await commandCalls(master.inspectUrl, 'spublish')
  await give(held, holder, key)
  await (await waiter).release()
  if (major >= 7) {
    expect(await commandCalls(master.inspectUrl, 'spublish')).toBeGreaterThan(spublished)
    expect(await published()).toBe(publishedBefore)
  } else {
    expect(await published()).toBeGreaterThan(publishedBefore)
  }
})

// A user whose ACL predates sharded wake-ups (no +spublish +ssubscribe) is still woken by releases: refused
// SSUBSCRIBE, its waiters SUBSCRIBE, and the release script, refused SPUBLISH, PUBLISHes.
test('a user whose ACL lacks the sharded pub/sub commands is still woken by releases (PUBLISH, SUBSCRIBE)', async () => {
  await createSnatchUser(cluster.urls, USER_PASSWORD, { username: 'snatch-older', sharded: false })
  const user = { username: 'snatch-older', password: USER_PASSWORD }
  const [holder, waiting] = [locker(user), locker(user)]
  const key = uniqueKey('older-acl')
  const channel = `{snatch:${key}}:released`
  const masters = await cluster.masters()
  const sum = async (each) => (await Promise.all(masters.map(each))).reduce((a, b) => a + b)
  const published = () => sum((m) => commandCalls(m.inspectUrl, 'publish'))
  const held = await holder.tryLock(key)
  const waiter = waiting.lock(key, { wait: 30_000 })
  const master = await cluster.masterOf(`snatch:${key}`)
  await waitFor('the waiter subscribed (plain) and marked the lock', async () => {
    const subscribers = await sum(async (m) => (await redisCommand(m.inspectUrl, 'PUBSUB', 'NUMSUB', channel))[1])
    return subscribers === 1 && (await redisCommand(master.inspectUrl, 'GET', `snatch:${key}`))?.endsWith('*')
  })
  const before = await published()
  expect(await held.release()).toBe(true)
  await (await waiter).release()
  expect(await published()).toBeGreaterThan(before)
})

test("under a prefix that is a hash tag ('{app}:'), locks() and schedules() answer on a cluster", async () => {
  const tagged = locker({ prefix: '{app}:' })
  const name = uniqueKey('tagged-schedule')
  const task = tagged.schedule(name, '@yearly', () => {})
  const key = uniqueKey('tagged-lock')
  const lock = await tagged.tryLock(key, { ttl: 30_000 })
  try {
    expect((await tagged.locks()).map((l) => l.key)).toContain(key)
    await waitFor('the schedule registered', async () => (await tagged.schedules()).some((s) => s.name === name))
  } finally {
    await lock.release()
    await task.stop()
  }
})

test('waitReplicas on a cluster: WAIT goes to the key\'s master, whose one replica acknowledges', async () => {
  const key = uniqueKey('cluster-wait')
  const master = await cluster.masterOf(`snatch:${key}`)
  expect((await locker().snatchTask(key, () => 1)).ran).toBe(true) // a write for the replica to acknowledge
  await replicasCaughtUp(master.inspectUrl)
  expect((await locker({ waitReplicas: 1 }).snatchTask(key, () => 1)).ran).toBe(true)
  let ran = false
  const err = await locker({ waitReplicas: 2 })
    .snatchTask(key, () => {
      ran = true
    })
    .catch((e) => e)
  expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(err.message).toMatch(/only 1 of 2 replicas acknowledged/)
  expect(ran).toBe(false)
  expect(await redisCommand(master.inspectUrl, 'EXISTS', `snatch:${key}`)).toBe(0)
})

test('a key with an unbalanced brace is refused on a cluster', async () => {
  const err = await locker().tryLock('a}b').catch((e) => e)
  expect(err).toMatchObject({ name: 'TypeError', code: 'ERR_SNATCH_INVALID_ARG' })
})

test("client: an ioredis Cluster and a node-redis cluster as the minimal ACL user, both still usable after close()", async () => {
  await createSnatchUser(cluster.urls, USER_PASSWORD)
  const nodes = cluster.seeds.map((seed) => new URL(seed)).map(({ hostname, port }) => ({ host: hostname, port: Number(port) }))
  // (The user may not run INFO, ioredis' ready check.)
  const redisOptions = { username: 'snatch', password: USER_PASSWORD, enableReadyCheck: false }
  const ioredisCluster = new Redis.Cluster(nodes, { redisOptions, enableReadyCheck: false })
  const nodeRedisCluster = createCluster({
    rootNodes: cluster.seeds.map((url) => ({ url })),
    defaults: { username: 'snatch', password: USER_PASSWORD },
  })
  await nodeRedisCluster.connect()
  try {
    for (const client of [ioredisCluster, nodeRedisCluster]) {
      const l = createLocker({ client, commandTimeout: COMMAND_TIMEOUT })
      const keys = Array.from({ length: 12 }, (_, i) => uniqueKey(`client-${i}`))
      const fences = await Promise.all(keys.map((key) => l.withLock(key, ({ fence }) => fence)))
      expect(fences.every((fence) => typeof fence === 'bigint')).toBe(true)
      await l.close()
      expect(await client.get(`snatch:${keys[0]}`)).toBeNull()
    }
  } finally {
    await Promise.all([ioredisCluster.quit(), nodeRedisCluster.quit()])
  }
})

test('a Nest application on the cluster, as the minimal ACL user: @Cron once across two replicas, @WithLock', async () => {
  await createSnatchUser(cluster.urls, USER_PASSWORD)
  await Promise.all(cluster.urls.map((node) => redisCommand(node, 'ACL', 'LOG', 'RESET')))
  const name = uniqueKey('nest-cluster')
  const { runs, fence } = await twoReplicas({ cluster: cluster.seeds.slice(0, 2), username: 'snatch', password: USER_PASSWORD }, name)
  const ticks = runs.map((run) => run.tick)
  expect(new Set(ticks).size).toBe(ticks.length)
  expect(typeof fence).toBe('bigint')
  expect(await aclDenials(cluster.urls)).toEqual([])
})

test('a node added and a slot migrated to it while locking: ASK and MOVED followed, fences keep rising', async () => {
  const l = locker()
  // Two keys in one slot (one hash tag): a lock held across the migration, and one locked in a loop.
  const tag = uniqueKey('migrate')
  const [heldKey, loopKey] = [`{${tag}}held`, `{${tag}}loop`]
  const held = await l.tryLock(heldKey, { ttl: 30_000 })
  const slot = await cluster.slotOf(`snatch:${heldKey}`)
  const fences = []
  const failures = []
  let stop = false
  const loop = (async () => {
    while (!stop) {
      const started = Date.now()
      let ran = false
      const outcome = await l
        .snatchTask(loopKey, async ({ fence }) => {
          ran = true
          return fence
        })
        .catch((e) => e)
      if (outcome instanceof Error) failures.push({ outcome, ran, ms: Date.now() - started })
      else if (outcome.ran) fences.push(outcome.fence)
    }
  })()
  const added = await cluster.addNode()
  let extendedWhileAsked
  await cluster.migrateSlot(slot, added, {
    // The keys are on the new node, the slot not yet: the old one answers ASK, which the held lock's extension
    // follows (one key; an acquisition, two keys of which one is missing there, gets TRYAGAIN until the slot moves).
    beforeAssign: async () => {
      extendedWhileAsked = await held.extend(30_000)
    },
  })
  const migrated = fences.length
  await waitFor('20 runs after the migration', async () => fences.length >= migrated + 20)
  stop = true
  await loop
  expect(extendedWhileAsked).toBe(true)
  expect(await held.extend(30_000)).toBe(true) // MOVED to the new node
  expect(await held.release()).toBe(true)
  for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1])
  for (const { outcome, ran, ms } of failures) {
    expect(outcome).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
    expect(ran).toBe(false)
    expect(ms).toBeLessThan(COMMAND_TIMEOUT * 3)
  }
  expect((await cluster.masterOf(`snatch:${loopKey}`)).id).toBe(added.id)
  if (major < 7) return // no direct connection
  // The moved slot sent calls to the main connection, which had the slot map fetched again: the new master gets a
  // direct connection of the locker.
  await waitFor('a direct connection on the new master', async () => {
    await l.snatchTask(loopKey, () => 1)
    return (await directClients(added)) > 0
  })
}, 60_000)

test('a master failover: calls fail with RedisError within commandTimeout or succeed, then work without a restart', async () => {
  const l = locker()
  const key = uniqueKey('failover')
  expect((await l.snatchTask(key, () => 1)).ran).toBe(true)
  const master = await cluster.masterOf(`snatch:${key}`)
  const killedAt = Date.now()
  await master.kill()
  const failover = cluster.waitForFailover(master)
  let promoted = false
  failover.then(() => (promoted = true))
  const codes = new Set()
  let recoveredAt = null
  let ranDuring = 0
  while (recoveredAt === null) {
    const started = Date.now()
    let ran = false
    const outcome = await l
      .snatchTask(key, () => {
        ran = true
      })
      .catch((e) => e)
    if (outcome instanceof Error) {
      codes.add(outcome.code)
      expect(ran).toBe(false)
      expect(Date.now() - started).toBeLessThan(COMMAND_TIMEOUT * 3)
    } else if (outcome.ran) {
      if (promoted) recoveredAt = Date.now()
      else ranDuring++
    }
    expect(Date.now() - killedAt).toBeLessThan(30_000)
  }
  await failover
  expect([...codes].filter((code) => code !== 'ERR_SNATCH_REDIS')).toEqual([])
  console.log(
    `cluster failover: locks work again ${recoveredAt - killedAt} ms after the master was killed ` +
      `(node timeout 1000 ms; ${ranDuring} calls ran before the promotion was seen)`,
  )
  expect(await l.withLock(key, async ({ fence }) => fence, { wait: 1000 })).toBeGreaterThan(0n)
  // Waiters are still woken by releases (resubscribed where needed), and everything else works.
  const live = cluster.nodes.filter((node) => node !== master).map((node) => node.inspectUrl)
  await everyMethod({ locker: l, other: locker(), nodes: live })
}, 60_000)

test("stored schedules and their due index spread over the masters: no single-slot hot key", async () => {
  // A fixed prefix: the buckets' hash tags include it, and with a random one 16 buckets land on only two of three
  // masters about once in 200 runs. With 'spread:' they fall 4, 8 and 4 on redis-cli's even split of the slots.
  const l = locker({ prefix: 'spread:' })
  const handler = 'spread'
  const ids = Array.from({ length: 64 }, (_, n) => `user:${n}:digest`)
  await Promise.all(ids.map((id) => l.upsertSchedule(id, { handler, cron: '0 8 * * *', timezone: 'Europe/Berlin' })))
  const masters = await cluster.masters()
  const count = async (node, pattern) => {
    let cursor = '0'
    let found = 0
    do {
      const [next, keys] = await redisCommand(node.inspectUrl, 'SCAN', cursor, 'MATCH', pattern, 'COUNT', '1000')
      cursor = next
      found += keys.length
    } while (cursor !== '0')
    return found
  }
  const prefix = '*'
  const dueIndexes = await Promise.all(masters.map((m) => count(m, `${prefix}stored:*:due:${handler}`)))
  const states = await Promise.all(masters.map((m) => count(m, `${prefix}user:*:digest}:state`)))
  // Every master of redis-cli's split holds some: a test above added a fourth master serving one migrated slot.
  expect(dueIndexes.filter((n) => n > 0).length).toBeGreaterThanOrEqual(3)
  expect(dueIndexes.reduce((a, b) => a + b, 0)).toBe(16)
  expect(states.filter((n) => n > 0).length).toBeGreaterThanOrEqual(3)
  expect(states.reduce((a, b) => a + b, 0)).toBe(64)
  const page = await l.listSchedules({ limit: 1000 })
  expect(page.schedules.map((s) => s.id).sort()).toEqual([...ids].sort())
  await Promise.all(ids.map((id) => l.removeSchedule(id)))
})
