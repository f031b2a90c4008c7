'use strict'
// Credentials: username/password as options or in the URL, a wrong password that never shows in an error, and every
// method as a user with exactly the minimal ACL the docs document (read from docs/deployments.md, so the two agree).

const { createLocker } = require('../..')
const { createSnatchUser, aclDenials } = require('../support/acl')
const { startRedis, redisCommand } = require('../support/redis-server')
const { everyMethod } = require('../support/every-method')
const { twoReplicas } = require('../support/nest-app')
const { uniqueKey } = require('../support/util')

const ADMIN_PASSWORD = 'admin-secret-51c0'
const USER_PASSWORD = 'user-secret-a93e'

let server
let admin
const lockers = []

/** A locker on the server with `options`, closed after the suite. */
function locker(options) {
  const made = createLocker({ url: server.url, commandTimeout: 1000, ...options })
  lockers.push(made)
  return made
}

beforeAll(async () => {
  server = await startRedis({ args: ['--requirepass', ADMIN_PASSWORD], password: ADMIN_PASSWORD })
  admin = `redis://:${ADMIN_PASSWORD}@127.0.0.1:${server.port}`
  await createSnatchUser([admin], USER_PASSWORD)
})

afterAll(async () => {
  await Promise.all(lockers.map((l) => l.close()))
  await server?.stop()
})

test('every method works as a user with exactly the docs\' minimal ACL, with no command refused', async () => {
  await redisCommand(admin, 'ACL', 'LOG', 'RESET')
  const options = { username: 'snatch', password: USER_PASSWORD }
  const [l, other] = [locker(options), locker(options)]
  await everyMethod({ locker: l, other, nodes: [admin] })
  // One-attempt calls go over the direct connection once it is open: as that user too.
  for (let i = 0; i < 20; i++) expect((await l.snatchTask(uniqueKey('acl-direct'), () => i)).ran).toBe(true)
  const clients = await redisCommand(admin, 'CLIENT', 'LIST')
  expect(clients).toMatch(/name=redis-snatch-direct .*user=snatch/)
  expect(await aclDenials([admin])).toEqual([])
})

test('a Nest application as that user: @Cron once across two replicas, @WithLock, no command refused', async () => {
  await redisCommand(admin, 'ACL', 'LOG', 'RESET')
  const options = { url: server.url, username: 'snatch', password: USER_PASSWORD }
  const { runs, fence } = await twoReplicas(options, uniqueKey('nest-acl'))
  const ticks = runs.map((run) => run.tick)
  expect(new Set(ticks).size).toBe(ticks.length)
  expect(typeof fence).toBe('bigint')
  expect(await aclDenials([admin])).toEqual([])
})

test('a user without the ACL is refused: RedisError, fn not run', async () => {
  await redisCommand(admin, 'ACL', 'SETUSER', 'nothing', 'on', '>nothing-pw', '~*', '-@all')
  let ran = false
  const err = await locker({ username: 'nothing', password: 'nothing-pw' })
    .snatchTask(uniqueKey('acl-none'), () => {
      ran = true
    })
    .catch((e) => e)
  expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(err.message).toMatch(/NOPERM|permission/i)
  expect(ran).toBe(false)
})

test('credentials in the URL win over the options', async () => {
  const url = `redis://snatch:${USER_PASSWORD}@127.0.0.1:${server.port}`
  const l = locker({ url, username: 'nothing', password: 'not-this-one' })
  expect((await l.snatchTask(uniqueKey('acl-url'), () => 1)).ran).toBe(true)
})

test.each([
  ['as an option', () => ({ username: 'snatch', password: 'wrong-option-pw-77' }), 'wrong-option-pw-77'],
  ['in the URL', () => ({ url: `redis://snatch:wrong-url-pw-88@127.0.0.1:${server.port}` }), 'wrong-url-pw-88'],
])('a wrong password %s: RedisError whose message, stack and cause never contain it', async (_name, options, secret) => {
  let ran = false
  const err = await locker(options())
    .snatchTask(uniqueKey('acl-wrong'), () => {
      ran = true
    })
    .catch((e) => e)
  expect(err).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(err.message).toMatch(/: the server refused the credentials \(a wrong password, or a user that does not exist or is disabled\)$/)
  expect(ran).toBe(false)
  for (const text of [err.message, err.stack, err.cause.message, err.cause.stack, JSON.stringify(err)]) {
    expect(text).not.toContain(secret)
    expect(text).not.toContain(USER_PASSWORD)
  }
})

test.each([
  ['username not a string', { username: 5 }],
  ['password not a string', { password: {} }],
  ['waitReplicas negative', { waitReplicas: -1 }],
  ['waitReplicas fractional', { waitReplicas: 1.5 }],
  ['url and cluster', { url: 'redis://127.0.0.1:1', cluster: ['redis://127.0.0.1:1'] }],
  ['sentinel without a name', { sentinel: { urls: ['redis://127.0.0.1:1'] } }],
  ['sentinel without urls', { sentinel: { name: 'mymaster' } }],
  ['cluster empty', { cluster: [] }],
])('%s: ERR_SNATCH_INVALID_ARG at createLocker', (_name, options) => {
  let err
  try {
    createLocker(options).close()
  } catch (e) {
    err = e
  }
  expect(err?.code).toBe('ERR_SNATCH_INVALID_ARG')
  expect(['TypeError', 'RangeError']).toContain(err.name)
})
