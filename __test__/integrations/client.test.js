'use strict'
// `createLocker({ client })`: the settings of a client the user configured (ioredis, node-redis), on real servers: a
// password-protected TLS server, a database other than 0, the minimal ACL user; the user's client untouched and
// usable after `locker.close()`; settings that cannot be carried over refused by name. Cluster and Sentinel clients:
// cluster.test.js and sentinel.test.js.

const Redis = require('ioredis')
const { createClient, createSentinel } = require('redis')
const { createLocker } = require('../..')
const { makeCertificates, startTlsRedis } = require('../support/deployments')
const { createSnatchUser } = require('../support/acl')
const { redisCommand, startRedis } = require('../support/redis-server')
const { uniqueKey } = require('../support/util')

const PASSWORD = 'client-secret-7d1e'
const USER_PASSWORD = 'client-user-secret'

let certs
let tlsServer
let server
beforeAll(async () => {
  certs = await makeCertificates()
  ;[tlsServer, server] = await Promise.all([
    startTlsRedis({ certs, password: PASSWORD }),
    startRedis({ args: ['--requirepass', PASSWORD], password: PASSWORD }),
  ])
  await createSnatchUser([`redis://:${PASSWORD}@127.0.0.1:${server.port}`], USER_PASSWORD)
})
afterAll(() => Promise.all([tlsServer?.stop(), server?.stop()]))

/**
 * A locker on `client`'s settings locks (a fence from a withLock; the key on the server while a lock is held, which
 * `check(key)` looks for), is closed, and `client` still answers `ping()`.
 */
async function lockWith(client, ping, check) {
  // The default prefix, which the minimal ACL allows.
  const locker = createLocker({ client, commandTimeout: 2000 })
  expect(typeof (await locker.withLock(uniqueKey('k'), ({ fence }) => fence))).toBe('bigint')
  const key = uniqueKey('held')
  const lock = await locker.tryLock(key)
  await check(`snatch:${key}`)
  await lock.release()
  await locker.close()
  expect(await ping()).toBe('PONG')
}

test('an ioredis client to a password-protected TLS server (ca from a file)', async () => {
  const client = new Redis({ host: '127.0.0.1', port: tlsServer.tlsPort, password: PASSWORD, tls: { ca: certs.ca } })
  try {
    await lockWith(client, () => client.ping(), async (key) => expect(await client.exists(key)).toBe(1))
    expect(client.status).toBe('ready')
  } finally {
    client.disconnect()
  }
})

test('an ioredis client given a rediss:// URL with the password in it', async () => {
  const client = new Redis(`rediss://:${PASSWORD}@127.0.0.1:${tlsServer.tlsPort}`, { tls: { ca: certs.ca }, lazyConnect: true })
  await lockWith(client, () => client.ping(), async (key) => expect(await redisCommand(tlsServer.inspectUrl, 'EXISTS', key)).toBe(1))
  client.disconnect()
})

test('an ioredis client as the minimal ACL user, on database 3', async () => {
  const client = new Redis({ port: server.port, username: 'snatch', password: USER_PASSWORD, db: 3 })
  try {
    await lockWith(client, () => client.ping(), async (key) => {
      expect(await client.exists(key)).toBe(1)
      expect(await redisCommand(`redis://:${PASSWORD}@127.0.0.1:${server.port}/0`, 'EXISTS', key)).toBe(0)
    })
  } finally {
    client.disconnect()
  }
})

test('a node-redis client (connected, with a URL naming database 2 and the password)', async () => {
  const client = createClient({ url: `redis://:${PASSWORD}@127.0.0.1:${server.port}/2` })
  await client.connect()
  try {
    await lockWith(client, () => client.ping(), async (key) => expect(await client.exists(key)).toBe(1))
    expect(client.isReady).toBe(true)
  } finally {
    await client.quit()
  }
})

test('a node-redis client over TLS (socket.tls, ca) with username and password', async () => {
  const client = createClient({
    socket: { host: '127.0.0.1', port: tlsServer.tlsPort, tls: true, ca: certs.ca },
    username: 'default',
    password: PASSWORD,
  })
  await lockWith(client, async () => {
    await client.connect()
    try {
      return await client.ping()
    } finally {
      await client.quit()
    }
  }, async (key) => expect(await redisCommand(tlsServer.inspectUrl, 'EXISTS', key)).toBe(1))
})

test('a wrong password in the client: RedisError that never shows it', async () => {
  const client = new Redis({ port: server.port, password: 'not-the-password-31f', lazyConnect: true })
  const locker = createLocker({ client, commandTimeout: 1000 })
  let ran = false
  const err = await locker.withLock(uniqueKey('k'), () => (ran = true)).catch((e) => e)
  expect(err).toMatchObject({ code: 'ERR_SNATCH_REDIS' })
  expect(ran).toBe(false)
  expect(`${err.message} ${err.stack} ${err.cause?.message}`).not.toContain('not-the-password-31f')
  await locker.close()
})

describe('refused, naming what cannot be carried over (ERR_SNATCH_INVALID_ARG)', () => {
  test.each([
    ['a Unix socket', () => new Redis({ path: '/tmp/redis.sock', lazyConnect: true }), /client: path cannot be carried over/],
    ['a NAT map', () => new Redis.Cluster([{ host: '127.0.0.1', port: 7000 }], { lazyConnect: true, natMap: { '10.0.0.1:7000': { host: '127.0.0.1', port: 7000 } } }), /natMap/],
    ['a TLS option the locker has not', () => new Redis({ tls: { ca: 'x', passphrase: 'secret-pass' }, lazyConnect: true }), /tls\.passphrase cannot be carried over/],
    ['a sentinel replica role', () => new Redis({ sentinels: [{ host: '127.0.0.1', port: 26379 }], name: 'm', role: 'slave', lazyConnect: true }), /role 'slave'/],
    ['a node-redis sentinel', () => createSentinel({ name: 'm', sentinelRootNodes: [{ host: '127.0.0.1', port: 26379 }] }), /node-redis sentinel client/],
    ['a node-redis Unix socket', () => createClient({ socket: { path: '/tmp/redis.sock' } }), /socket\.path/],
    ['a node-redis credentials provider', () => createClient({ credentialsProvider: { type: 'async-credentials-provider', credentials: async () => ({}) } }), /credentialsProvider/],
    ['not a client', () => ({ host: '127.0.0.1' }), /client must be an ioredis Redis or Cluster, or a node-redis client/],
  ])('%s', (_, client, message) => {
    const err = (() => {
      try {
        createLocker({ client: client() })
      } catch (e) {
        return e
      }
    })()
    expect(err).toMatchObject({ name: 'TypeError', code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(message) })
    expect(err.message).not.toContain('secret-pass')
  })

  test('client with url, tls or credentials of its own', () => {
    const client = new Redis({ lazyConnect: true })
    expect(() => createLocker({ client, url: 'redis://127.0.0.1:6379', password: 'x' })).toThrow(
      'client gives where and how to connect: url and password cannot be given with it',
    )
  })
})
