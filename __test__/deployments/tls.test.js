'use strict'
// TLS (rediss://) against real redis-servers with certificates made by openssl: trust by `ca` (string, Buffer,
// array), NODE_EXTRA_CA_CERTS, servername, rejectUnauthorized, mutual TLS, and the errors of a handshake that fails.

const fs = require('node:fs')
const { createLocker } = require('../..')
const { redisCommand } = require('../support/redis-server')
const { makeCertificates, startTlsRedis, startCluster, startSentinel } = require('../support/deployments')
const { everyMethod } = require('../support/every-method')
const { uniqueKey } = require('../support/util')

const COMMAND_TIMEOUT = 1000

let certs
let server
let mutual
const lockers = []

/** A locker with `options`, closed after the suite. */
function locker(options) {
  const made = createLocker({ commandTimeout: COMMAND_TIMEOUT, ...options })
  lockers.push(made)
  return made
}

beforeAll(async () => {
  certs = await makeCertificates()
  ;[server, mutual] = await Promise.all([
    startTlsRedis({ certs }),
    startTlsRedis({ certs, authClients: 'yes' }),
  ])
})

afterAll(async () => {
  await Promise.all(lockers.map((l) => l.close()))
  await Promise.all([server?.stop(), mutual?.stop()])
})

/** What a snatchTask on `l` comes to: its error (or result), whether fn ran, and how long it took. */
async function attempt(l) {
  let ran = false
  const started = Date.now()
  const outcome = await l
    .snatchTask(uniqueKey('tls'), () => {
      ran = true
    })
    .catch((e) => e)
  return { outcome, ran, ms: Date.now() - started }
}

test('every method works over TLS, trusting the test CA', async () => {
  const made = () => locker({ url: server.tlsUrl, tls: { ca: certs.ca } })
  await everyMethod({ locker: made(), other: made(), nodes: [server.inspectUrl] })
})

test.each([
  ['the test CA', () => [server, { ca: certs.ca }]],
  ['servername', () => [server, { ca: certs.ca, servername: 'redis.test' }]],
  ['rejectUnauthorized: false', () => [server, { rejectUnauthorized: false }]],
  ['a client certificate', () => [mutual, { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey }]],
])('the direct connection speaks TLS too (%s): one-attempt calls use it once it is open', async (_name, setup) => {
  const [target, tls] = setup()
  /** Direct connections on the TLS port whose last command was `last` (any, when not given). */
  const directOnTls = async (last = '') => {
    const clients = (await redisCommand(target.inspectUrl, 'CLIENT', 'LIST')).split('\n')
    const port = `laddr=127.0.0.1:${target.tlsPort} `
    return clients.filter((c) => c.includes('name=redis-snatch-direct') && c.includes(port) && c.includes(last)).length
  }
  const [opened, released] = [await directOnTls(), await directOnTls(' cmd=evalsha ')]
  const l = locker({ url: target.tlsUrl, tls })
  for (let i = 0; i < 20; i++) expect((await l.snatchTask(uniqueKey('tls-direct'), () => i)).ran).toBe(true)
  expect(await directOnTls()).toBe(opened + 1)
  // A lock's release goes over it: the release script is its last command.
  const lock = await l.tryLock(uniqueKey('tls-direct-lock'))
  expect(await lock.release()).toBe(true)
  expect(await directOnTls(' cmd=evalsha ')).toBe(released + 1)
})

test.each([
  ['a Buffer', () => ({ ca: Buffer.from(certs.ca) })],
  ['an array with the other CA first', () => ({ ca: [certs.otherCa, Buffer.from(certs.ca)] })],
  ['servername redis.test (in the certificate) for 127.0.0.1', () => ({ ca: certs.ca, servername: 'redis.test' })],
  ['rejectUnauthorized: false, no ca', () => ({ rejectUnauthorized: false })],
])('ca as %s connects', async (_name, tls) => {
  const { outcome, ran } = await attempt(locker({ url: server.tlsUrl, tls: tls() }))
  expect(outcome).toMatchObject({ ran: true })
  expect(ran).toBe(true)
})

test.each([
  ['a CA that did not sign the server certificate', () => ({ ca: certs.otherCa }), /UnknownIssuer|certificate/i],
  ['the default trust (the platform roots)', () => undefined, /UnknownIssuer|certificate/i],
  ['a servername the certificate does not name', () => ({ ca: certs.ca, servername: 'other.test' }), /NotValidForName|certificate/i],
])('%s: RedisError naming the TLS failure within about commandTimeout, fn not run', async (_name, tls, cause) => {
  const { outcome, ran, ms } = await attempt(locker({ url: server.tlsUrl, tls: tls() }))
  expect(outcome).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
  expect(outcome.message).toMatch(cause)
  expect(outcome.cause.message).toMatch(cause)
  expect(ran).toBe(false)
  expect(ms).toBeLessThan(COMMAND_TIMEOUT * 3)
})

test('NODE_EXTRA_CA_CERTS adds to the default trust', async () => {
  const saved = process.env.NODE_EXTRA_CA_CERTS
  process.env.NODE_EXTRA_CA_CERTS = certs.paths.ca
  try {
    const { outcome } = await attempt(locker({ url: server.tlsUrl }))
    expect(outcome).toMatchObject({ ran: true })
  } finally {
    if (saved === undefined) delete process.env.NODE_EXTRA_CA_CERTS
    else process.env.NODE_EXTRA_CA_CERTS = saved
  }
})

describe('mutual TLS', () => {
  test('with a client certificate: every method works', async () => {
    const tls = { ca: certs.ca, cert: certs.clientCert, key: fs.readFileSync(certs.paths.clientKey) }
    const made = () => locker({ url: mutual.tlsUrl, tls })
    await everyMethod({ locker: made(), other: made(), nodes: [mutual.inspectUrl] })
  })

  test('without one: RedisError within about commandTimeout, fn not run', async () => {
    const { outcome, ran, ms } = await attempt(locker({ url: mutual.tlsUrl, tls: { ca: certs.ca } }))
    expect(outcome).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
    expect(outcome.message).toMatch(/certificate|tls|alert|closed|reset|broken/i)
    expect(ran).toBe(false)
    expect(ms).toBeLessThan(COMMAND_TIMEOUT * 3)
  })
})

describe('TLS on every node', () => {
  test('a cluster of TLS nodes (rediss:// seeds): every method works', async () => {
    const cluster = await startCluster({ tls: certs })
    try {
      const made = () => locker({ cluster: cluster.seeds.slice(0, 2), tls: { ca: certs.ca } })
      await everyMethod({ locker: made(), other: made(), nodes: cluster.urls })
    } finally {
      await cluster.stop()
    }
  }, 60_000)

  test('sentinels and master on TLS (rediss:// sentinels): every method works', async () => {
    const deployment = await startSentinel({ tls: certs })
    try {
      const sentinel = { urls: deployment.urls, name: deployment.name }
      const made = () => locker({ sentinel, tls: { ca: certs.ca } })
      const nodes = [deployment.master.inspectUrl, deployment.replica.inspectUrl]
      await everyMethod({ locker: made(), other: made(), nodes })
    } finally {
      await deployment.stop()
    }
  }, 60_000)
})

test.each([
  ['tls with a redis:// URL', () => ({ url: server.url, tls: { ca: certs.ca } }), TypeError],
  ['ca not PEM', () => ({ url: server.tlsUrl, tls: { ca: 'not a certificate' } }), TypeError],
  ['ca a number', () => ({ url: server.tlsUrl, tls: { ca: 5 } }), TypeError],
  ['cert without key', () => ({ url: server.tlsUrl, tls: { ca: certs.ca, cert: certs.clientCert } }), TypeError],
  ['key not PEM', () => ({ url: server.tlsUrl, tls: { cert: certs.clientCert, key: 'nope' } }), TypeError],
  ['rejectUnauthorized a string', () => ({ url: server.tlsUrl, tls: { rejectUnauthorized: 'no' } }), TypeError],
])('%s: ERR_SNATCH_INVALID_ARG at createLocker', (_name, options, Class) => {
  let err
  try {
    createLocker(options()).close()
  } catch (e) {
    err = e
  }
  expect(err).toBeInstanceOf(Class)
  expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
})
