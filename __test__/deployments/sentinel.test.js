'use strict'
// Sentinel: a master, a replica and 3 sentinels (redis-server sentinel.conf --sentinel), with sentinel credentials
// that differ from the master's. The master is discovered through the sentinels, every method works, a wrong
// password never shows in an error, and after the master is killed the locker follows the promoted replica.

const Redis = require('ioredis')
const { createLocker } = require('../..')
const { redisCommand } = require('../support/redis-server')
const { startSentinel, waitFor } = require('../support/deployments')
const { createSnatchUser, aclDenials } = require('../support/acl')
const { everyMethod } = require('../support/every-method')
const { twoReplicas } = require('../support/nest-app')
const { uniqueKey } = require('../support/util')

const COMMAND_TIMEOUT = 1000
const MASTER_PASSWORD = 'master-secret-9f2c'
const SENTINEL_PASSWORD = 'sentinel-secret-4b7e'
const USER_PASSWORD = 'sentinel-user-secret'

let deployment
const lockers = []

/** A locker on the sentinels' master, closed after the suite. */
function locker(options = {}) {
  const made = createLocker({
    sentinel: { urls: deployment.urls, name: deployment.name },
    password: MASTER_PASSWORD,
    commandTimeout: COMMAND_TIMEOUT,
    ...options,
  })
  lockers.push(made)
  return made
}

beforeAll(async () => {
  deployment = await startSentinel({ masterPassword: MASTER_PASSWORD, sentinelPassword: SENTINEL_PASSWORD })
}, 60_000)

afterAll(async () => {
  await Promise.all(lockers.map((l) => l.close()))
  await deployment?.stop()
})

/** The plain URLs (with the password) of the master and the replica, for inspection. */
const dataNodes = () => [deployment.master.inspectUrl, deployment.replica.inspectUrl]

test('every method works on the master the sentinels name, as the docs\' minimal ACL user', async () => {
  await createSnatchUser(dataNodes(), USER_PASSWORD)
  const user = { username: 'snatch', password: USER_PASSWORD }
  await everyMethod({ locker: locker(user), other: locker(user), nodes: dataNodes() })
  expect(await aclDenials(dataNodes())).toEqual([])
})

test('a wrong master password is a RedisError that never shows the password', async () => {
  const wrong = 'wrong-password-7d1a'
  let ran = false
  const err = await locker({ password: wrong })
    .snatchTask(uniqueKey('sentinel-auth'), () => {
      ran = true
    })
    .catch((e) => e)
  expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(ran).toBe(false)
  for (const text of [err.message, err.stack, err.cause.message, err.cause.stack, JSON.stringify(err)]) {
    for (const secret of [wrong, MASTER_PASSWORD, SENTINEL_PASSWORD]) expect(text).not.toContain(secret)
  }
})

test("client: an ioredis client of the sentinels (their password and the master's), as the minimal ACL user", async () => {
  await createSnatchUser(dataNodes(), USER_PASSWORD)
  const sentinels = deployment.sentinels.map((sentinel) => ({ host: '127.0.0.1', port: sentinel.port }))
  const client = new Redis({
    sentinels,
    name: deployment.name,
    sentinelPassword: SENTINEL_PASSWORD,
    username: 'snatch',
    password: USER_PASSWORD,
    enableReadyCheck: false, // (the user may not run INFO, ioredis' ready check)
  })
  try {
    const l = createLocker({ client, commandTimeout: COMMAND_TIMEOUT })
    const key = uniqueKey('client')
    expect(typeof (await l.withLock(key, ({ fence }) => fence))).toBe('bigint')
    const lock = await l.tryLock(key)
    expect(await client.exists(`snatch:${key}`)).toBe(1)
    await lock.release()
    await l.close()
    expect(await client.ping()).toBe('PONG')
  } finally {
    client.disconnect()
  }
})

test('a Nest application on the sentinels\' master, as the minimal ACL user: @Cron once across two replicas, @WithLock', async () => {
  await createSnatchUser(dataNodes(), USER_PASSWORD)
  await Promise.all(dataNodes().map((node) => redisCommand(node, 'ACL', 'LOG', 'RESET')))
  const name = uniqueKey('nest-sentinel')
  const options = { sentinel: { urls: deployment.urls, name: deployment.name }, username: 'snatch', password: USER_PASSWORD }
  const { runs, fence } = await twoReplicas(options, name)
  const ticks = runs.map((run) => run.tick)
  expect(new Set(ticks).size).toBe(ticks.length)
  expect(typeof fence).toBe('bigint')
  expect(await aclDenials(dataNodes())).toEqual([])
})

test('an unknown master name, or no sentinel reachable: RedisError, fn not run', async () => {
  for (const sentinel of [
    { urls: deployment.urls, name: 'no-such-master' },
    { urls: ['redis://127.0.0.1:1'], name: deployment.name },
  ]) {
    let ran = false
    const err = await locker({ sentinel })
      .snatchTask(uniqueKey('sentinel-missing'), () => {
        ran = true
      })
      .catch((e) => e)
    expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
    expect(ran).toBe(false)
  }
})

test('after a SENTINEL FAILOVER (the old master stays up, as a replica), the locker follows the new master', async () => {
  const l = locker()
  const key = uniqueKey('sentinel-switch')
  const before = await l.snatchTask(key, () => 1)
  expect(before.ran).toBe(true)
  const oldPort = await deployment.currentMasterPort()
  const [sentinel] = deployment.sentinels
  await redisCommand(sentinel.inspectUrl, 'SENTINEL', 'FAILOVER', deployment.name)
  const newPort = await deployment.waitForFailover(oldPort)
  // Sentinel turns the old master into a replica a moment after promoting the new one; a write to the old master
  // in between is lost (docs/deployments.md: what a failover means for a held lock). Once it is a replica, the locker's
  // connection to it has its next write refused (READONLY), after which the locker asks the sentinels again.
  const old = [deployment.master, deployment.replica].find((node) => node.port === oldPort)
  await waitFor('the old master to become a replica', async () => (await redisCommand(old.inspectUrl, 'ROLE'))[0] === 'slave')
  const deadline = Date.now() + 10_000
  let outcome
  do {
    outcome = await l.snatchTask(key, () => 1).catch((e) => e)
    if (outcome instanceof Error) expect(outcome).toMatchObject({ code: 'ERR_SNATCH_REDIS' })
  } while (!(outcome.ran === true) && Date.now() < deadline)
  expect(outcome).toMatchObject({ ran: true })
  // A failover on request loses nothing: the fence counter went on on the new master.
  expect(outcome.fence).toBeGreaterThan(before.fence)
  const counter = await redisCommand(`redis://:${MASTER_PASSWORD}@127.0.0.1:${newPort}`, 'GET', '{snatch:}:fence')
  expect(BigInt(counter)).toBeGreaterThanOrEqual(outcome.fence)
})

test('after the master is killed, the locker follows the promoted replica without a restart', async () => {
  const l = locker()
  const key = uniqueKey('sentinel-failover')
  expect((await l.snatchTask(key, () => 1)).ran).toBe(true)
  const oldPort = await deployment.currentMasterPort()
  const [master, survivor] = [deployment.master, deployment.replica].sort((a) => (a.port === oldPort ? -1 : 1))
  const killedAt = Date.now()
  await master.kill()
  const failover = deployment.waitForFailover(oldPort)
  let promoted = false
  failover.then(() => (promoted = true))
  let recoveredAt = null
  while (recoveredAt === null) {
    const started = Date.now()
    let ran = false
    const outcome = await l
      .snatchTask(key, () => {
        ran = true
      })
      .catch((e) => e)
    if (outcome instanceof Error) {
      expect(outcome).toMatchObject({ code: 'ERR_SNATCH_REDIS' })
      expect(ran).toBe(false)
      expect(Date.now() - started).toBeLessThan(COMMAND_TIMEOUT * 3)
      await new Promise((resolve) => setTimeout(resolve, 50))
    } else if (outcome.ran && promoted) {
      recoveredAt = Date.now()
    }
    expect(Date.now() - killedAt).toBeLessThan(30_000)
  }
  await failover
  console.log(`sentinel failover: locks work again ${recoveredAt - killedAt} ms after the master was killed (down-after 1000 ms)`)
  // Waiting acquisitions, woken by releases, work on the new master too.
  await everyMethod({ locker: l, other: locker(), nodes: [survivor.inspectUrl] })
}, 60_000)
