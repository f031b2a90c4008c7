'use strict'
// TLS parity with node:tls: with the same `tls` options, redis-snatch connects exactly when ioredis (Node's TLS) does,
// and refuses with a RedisError naming the reason when it does not. Each case runs both against the same real
// redis-server (redis-snatch on both of its connections, the main and the direct one): server certificates of every
// kind (v3 with subjectAltName, CN only, v1, expired, another CA, self-signed, of an intermediate CA), reached as
// `localhost` and as `127.0.0.1`, and client certificates (v3, v1, expired, another CA, none) for a server that asks
// for one.

const dc = require('node:diagnostics_channel')
const Redis = require('ioredis')
const { createLocker } = require('../..')
const { makeCertificateSets } = require('../support/certificate-sets')
const { startTlsRedis } = require('../support/deployments')
const { uniqueKey } = require('../support/util')

const TIMEOUT = 2000

let certs
const servers = {}

/** A TLS redis-server presenting certificate `name`; `authClients` asks clients for theirs. */
function startWith(name, authClients = 'no') {
  const paths = { serverCert: certs.file(`${name}.crt`), serverKey: certs.file(`${name}.key`), ca: certs.file('ca.crt') }
  return startTlsRedis({ certs: { paths }, authClients })
}

beforeAll(async () => {
  certs = await makeCertificateSets()
  const names = [
    'san', 'cn-only', 'v1', 'v1-elsewhere', 'elsewhere', 'expired', 'other-ca-san', 'self-signed', 'v1-chain', 'v3-chain',
  ]
  const started = await Promise.all(names.map((name) => startWith(name)))
  names.forEach((name, i) => {
    servers[name] = started[i]
  })
  servers.mutual = await startWith('san', 'yes')
}, 60_000)

afterAll(async () => {
  await Promise.all(Object.values(servers).map((server) => server.stop()))
})

/** `tls` options of PEM names: `ca`, and `cert`/`key` from a client certificate's name. */
function tlsOf({ ca = 'ca', client = null, ...rest } = {}) {
  const tls = { ...rest }
  if (ca) tls.ca = certs.pem(`${ca}.crt`)
  if (client) Object.assign(tls, { cert: certs.pem(`${client}.crt`), key: certs.pem(`${client}.key`) })
  return tls
}

/** Whether ioredis gets a PING answered over `tls`: `{ ok }` or `{ ok: false, error }`. */
async function ioredisOutcome(host, port, tls) {
  const redis = new Redis({
    host,
    port,
    tls,
    lazyConnect: true,
    connectTimeout: TIMEOUT,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  let error = null
  redis.on('error', (err) => {
    error ??= err
  })
  try {
    await redis.connect()
    return (await redis.ping()) === 'PONG' ? { ok: true } : { ok: false, error: new Error('no PONG') }
  } catch (err) {
    return { ok: false, error: error || err }
  } finally {
    redis.disconnect()
  }
}

/**
 * Whether redis-snatch runs tasks over `tls` on both of its connections: the main one, then the direct one once it
 * is open (an acquire message on diagnostics_channel says so); at most 50 tasks.
 */
async function snatchOutcome(host, port, tls) {
  const locker = createLocker({ url: `rediss://${host}:${port}`, tls, commandTimeout: TIMEOUT })
  const key = uniqueKey('parity')
  let direct = false
  const listen = (message) => {
    if (message.key.startsWith(key) && message.direct) direct = true
  }
  dc.subscribe('redis-snatch:acquire', listen)
  try {
    for (let i = 0; i < 50 && !direct; i++) {
      const { ran } = await locker.snatchTask(`${key}:${i}`, () => {})
      if (!ran) return { ok: false, error: new Error(`task ${i} did not run`) }
    }
    return direct ? { ok: true } : { ok: false, error: new Error('no task went over the direct connection') }
  } catch (error) {
    return { ok: false, error }
  } finally {
    dc.unsubscribe('redis-snatch:acquire', listen)
    await locker.close()
  }
}

// [case, server, host, tls options, Node's verdict, what redis-snatch's error names when refused]
const CASES = [
  ['v3 with subjectAltName, as localhost', 'san', 'localhost', {}, true, null],
  ['v3 with subjectAltName, as 127.0.0.1', 'san', '127.0.0.1', {}, true, null],
  ['v3 naming the host in its CN only, as localhost', 'cn-only', 'localhost', {}, true, null],
  ['v3 naming the host in its CN only, as 127.0.0.1', 'cn-only', '127.0.0.1', {}, false, /not valid for name/],
  ['CN only, as 127.0.0.1 with servername localhost', 'cn-only', '127.0.0.1', { servername: 'localhost' }, true, null],
  ['v1 signed by the CA, as localhost', 'v1', 'localhost', {}, true, null],
  ['v1 signed by the CA, as 127.0.0.1', 'v1', '127.0.0.1', {}, false, /not valid for name/],
  ['v1 whose CN names another host', 'v1-elsewhere', 'localhost', {}, false, /not valid for name/],
  ['v1 trusted through the other CA only', 'v1', 'localhost', { ca: 'other-ca' }, false, /UnknownIssuer/],
  ['v1 with rejectUnauthorized: false', 'v1', '127.0.0.1', { ca: null, rejectUnauthorized: false }, true, null],
  ['a DNS subjectAltName of another host (CN is the host)', 'elsewhere', 'localhost', {}, false, /not valid for name/],
  ['expired', 'expired', 'localhost', {}, false, /Expired/],
  ['signed by another CA', 'other-ca-san', 'localhost', {}, false, /UnknownIssuer/],
  ['the right certificate, trusting another CA', 'san', 'localhost', { ca: 'other-ca' }, false, /UnknownIssuer/],
  ['v1 signed by an intermediate CA the server sends', 'v1-chain', 'localhost', {}, true, null],
  ['v3 signed by an intermediate CA the server sends', 'v3-chain', 'localhost', {}, true, null],
  ['v1 signed by an intermediate CA, trusting another CA', 'v1-chain', 'localhost', { ca: 'other-ca' }, false, /UnknownIssuer/],
  ['self-signed, given as ca', 'self-signed', 'localhost', { ca: 'self-signed' }, true, null],
  ['self-signed, not trusted', 'self-signed', 'localhost', {}, false, /UnknownIssuer/],
  ['client certificate v3', 'mutual', 'localhost', { client: 'client-v3' }, true, null],
  ['client certificate v1', 'mutual', 'localhost', { client: 'client-v1' }, true, null],
  ['client certificate expired', 'mutual', 'localhost', { client: 'client-expired' }, false, /alert: CertificateExpired/],
  ['client certificate of another CA', 'mutual', 'localhost', { client: 'client-other-ca' }, false, /alert: UnknownCA/],
  ['no client certificate', 'mutual', 'localhost', {}, false, /alert: CertificateRequired/],
]

test.each(CASES)('%s: both agree', async (_name, server, host, options, accepted, reason) => {
  const { tlsPort } = servers[server]
  const tls = tlsOf(options)
  const [node, ours] = await Promise.all([ioredisOutcome(host, tlsPort, tls), snatchOutcome(host, tlsPort, tls)])
  expect({ node: node.ok, ours: ours.ok }).toEqual({ node: accepted, ours: accepted })
  if (!accepted) {
    expect(ours.error).toMatchObject({ name: 'RedisError', code: 'ERR_SNATCH_REDIS' })
    expect(ours.error.message).toMatch(reason)
  }
})

test('a key that is not the certificate\'s is an invalid argument, as in Node', () => {
  const tls = { ca: certs.pem('ca.crt'), cert: certs.pem('client-v1.crt'), key: certs.pem('client-v3.key') }
  expect(() => require('node:tls').createSecureContext(tls)).toThrow(/key values mismatch/)
  expect(() => createLocker({ url: `rediss://localhost:${servers.mutual.tlsPort}`, tls })).toThrow(
    expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(/tls\.key/) }),
  )
})
