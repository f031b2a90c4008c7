'use strict'
// The deployments of ./deployments (TLS servers, Redis Cluster, Sentinel) against the real processes they start.

const crypto = require('node:crypto')
const fs = require('node:fs')
const tls = require('node:tls')

const { redisCommand } = require('../support/redis-server')
const { makeCertificates, startTlsRedis, startCluster, startSentinel } = require('../support/deployments')

const START_TIMEOUT_MS = 60_000
const FAILOVER_TIMEOUT_MS = 45_000
const CERT_REQUIRED = /certificate required|ECONNRESET/

/** Encode one command as RESP. */
function resp(...args) {
  return `*${args.length}\r\n${args.map((arg) => `$${Buffer.byteLength(String(arg))}\r\n${arg}\r\n`).join('')}`
}

/**
 * Connect to 127.0.0.1:`port` over TLS with `options` (ca, cert, key, servername), send `commands` (RESP) and resolve
 * the first line of the last reply (the replies before it must be one line, like AUTH's); rejects when the handshake
 * fails or the server closes first.
 */
function tlsRequest(port, options, ...commands) {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...options })
    let reply = ''
    const fail = (err) => {
      socket.destroy()
      reject(err)
    }
    socket.setTimeout(5000, () => fail(new Error('no TLS reply within 5000 ms')))
    socket.once('error', fail)
    socket.once('close', () => fail(new Error(`closed before replying (got ${JSON.stringify(reply)})`)))
    socket.on('data', (chunk) => {
      reply += chunk
      const lines = reply.split('\r\n')
      if (lines.length <= commands.length) return
      socket.removeAllListeners('close')
      socket.destroy()
      resolve(lines[commands.length - 1])
    })
    socket.write(commands.map((command) => resp(...command)).join(''))
  })
}

/** True once the handle's process has exited. */
const exited = (node) => node.process.exitCode !== null || node.process.signalCode !== null

describe('makeCertificates', () => {
  test('makes a CA, a server and a client certificate signed by it, and an unrelated CA, once', async () => {
    expect(makeCertificates()).toBe(makeCertificates())
    const certs = await makeCertificates()
    const ca = new crypto.X509Certificate(certs.ca)
    const server = new crypto.X509Certificate(certs.serverCert)
    const client = new crypto.X509Certificate(certs.clientCert)
    const otherCa = new crypto.X509Certificate(certs.otherCa)
    expect([ca.ca, otherCa.ca, server.ca, client.ca]).toEqual([true, true, false, false])
    expect(server.checkIssued(ca) && server.verify(ca.publicKey)).toBe(true)
    expect(client.checkIssued(ca) && client.verify(ca.publicKey)).toBe(true)
    expect(server.checkIssued(otherCa) || server.verify(otherCa.publicKey)).toBe(false)
    expect(server.subjectAltName).toBe('IP Address:127.0.0.1, DNS:localhost, DNS:redis.test')
    expect(server.checkIP('127.0.0.1')).toBe('127.0.0.1')
    expect(client.keyUsage).toContain('1.3.6.1.5.5.7.3.2') // clientAuth
    expect(crypto.createPrivateKey(certs.serverKey).asymmetricKeyType).toBe('ec')
    for (const [name, file] of Object.entries(certs.paths)) {
      expect(file.startsWith(certs.dir)).toBe(true)
      expect(fs.readFileSync(file, 'utf8')).toBe(certs[name])
    }
  })
})

describe('startTlsRedis', () => {
  const servers = []
  let certs
  beforeAll(async () => {
    certs = await makeCertificates()
  })
  afterAll(() => Promise.all(servers.map((server) => server.stop())))

  test('answers PING over TLS to a client that trusts the CA, and checks the server name', async () => {
    const server = await startTlsRedis({ certs })
    servers.push(server)
    expect(server.tlsUrl).toBe(`rediss://127.0.0.1:${server.tlsPort}`)
    expect(server.tlsPort).not.toBe(server.port)
    expect(await redisCommand(server.url, 'PING')).toBe('PONG') // the plaintext port stays open
    expect(await tlsRequest(server.tlsPort, { ca: certs.ca }, ['PING'])).toBe('+PONG')
    expect(await tlsRequest(server.tlsPort, { ca: certs.ca, servername: 'redis.test' }, ['PING'])).toBe('+PONG')
    const wrongName = { ca: certs.ca, servername: 'other.test' }
    await expect(tlsRequest(server.tlsPort, wrongName, ['PING'])).rejects.toMatchObject({
      code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    })
    // redis-server (OpenSSL) sends the CA it found in tls-ca-cert-file along with its certificate.
    const untrusted = await tlsRequest(server.tlsPort, { ca: certs.otherCa }, ['PING']).catch((err) => err)
    expect(['SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE']).toContain(untrusted.code)
  })

  test('with authClients yes, answers only a client that presents its certificate', async () => {
    const server = await startTlsRedis({ certs, authClients: 'yes' })
    servers.push(server)
    // TLS 1.3: the client's handshake completes; the server's alert arrives instead of the first reply.
    await expect(tlsRequest(server.tlsPort, { ca: certs.ca }, ['PING'])).rejects.toThrow(CERT_REQUIRED)
    const withCert = { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey }
    expect(await tlsRequest(server.tlsPort, withCert, ['PING'])).toBe('+PONG')
  })
})

describe('startCluster', () => {
  let cluster
  beforeAll(async () => {
    cluster = await startCluster()
  }, START_TIMEOUT_MS)
  afterAll(() => cluster?.stop())

  test('is ok with 3 masters and 3 replicas on loopback ports', async () => {
    expect(cluster.nodes).toHaveLength(6)
    expect(cluster.seeds).toEqual(cluster.nodes.map((node) => `redis://127.0.0.1:${node.port}`))
    const roles = []
    for (const node of cluster.nodes) {
      const info = await redisCommand(node.url, 'CLUSTER', 'INFO')
      expect(info).toContain('cluster_state:ok\r\n')
      expect(info).toContain('cluster_known_nodes:6\r\n')
      const bus = await redisCommand(node.url, 'CONFIG', 'GET', 'cluster-port')
      expect(Number(bus[1])).toBe(node.busPort)
      roles.push((await redisCommand(node.url, 'ROLE'))[0])
    }
    expect(roles.sort()).toEqual(['master', 'master', 'master', 'slave', 'slave', 'slave'])
    const masters = await cluster.masters()
    expect(masters).toHaveLength(3)
    for (const master of masters) {
      const replica = await cluster.replicaOf(master)
      const role = await redisCommand(replica.url, 'ROLE')
      expect([role[0], role[2]]).toEqual(['slave', master.port])
    }
  })

  test('masterOf(key) is the master that serves the key', async () => {
    const master = await cluster.masterOf('harness:{one}')
    expect((await redisCommand(master.url, 'ROLE'))[0]).toBe('master')
    expect(await redisCommand(master.url, 'SET', 'harness:{one}', '1')).toBe('OK') // no MOVED
    const other = cluster.nodes.find((node) => node !== master)
    await expect(redisCommand(other.url, 'GET', 'harness:{one}')).rejects.toThrow(/^MOVED /)
  })

  test('addNode() joins an empty master; migrateSlot() moves a slot and its keys to it (ASK, then MOVED)', async () => {
    const added = await cluster.addNode()
    expect(cluster.nodes).toHaveLength(7)
    for (const node of cluster.nodes) {
      expect(await redisCommand(node.url, 'CLUSTER', 'NODES')).toContain(added.id)
    }
    const key = 'harness:{moving}'
    const source = await cluster.masterOf(key)
    await redisCommand(source.url, 'SET', key, 'here')
    const slot = await redisCommand(source.url, 'CLUSTER', 'KEYSLOT', key)
    let duringMigration = null
    const result = await cluster.migrateSlot(slot, added, {
      async beforeAssign() {
        duringMigration = await redisCommand(source.url, 'GET', key).catch((err) => err.message)
      },
    })
    expect(result).toMatchObject({ slot, source, target: added, moved: 1 })
    expect(duringMigration).toBe(`ASK ${slot} 127.0.0.1:${added.port}`)
    expect(await redisCommand(added.url, 'GET', key)).toBe('here')
    await expect(redisCommand(source.url, 'GET', key)).rejects.toThrow(`MOVED ${slot} 127.0.0.1:${added.port}`)
    expect(await cluster.masterOf(key)).toBe(added)
  })

  test(
    "a killed master's replica takes over (waitForFailover)",
    async () => {
      const key = 'harness:{failover}'
      const victim = await cluster.masterOf(key)
      const replica = await cluster.replicaOf(victim)
      expect(replica).not.toBeNull()
      await redisCommand(victim.url, 'SET', key, 'kept')
      expect(await redisCommand(victim.url, 'WAIT', 1, 5000)).toBe(1)
      await victim.kill()
      await cluster.waitForFailover(victim)
      expect(await cluster.masterOf(key)).toBe(replica)
      expect((await redisCommand(replica.url, 'ROLE'))[0]).toBe('master')
      expect(await redisCommand(replica.url, 'GET', key)).toBe('kept')
      for (const node of cluster.nodes.filter((node) => node !== victim)) {
        expect(await redisCommand(node.url, 'CLUSTER', 'INFO')).toContain('cluster_state:ok\r\n')
      }
    },
    FAILOVER_TIMEOUT_MS,
  )

  test('stop() ends every node, also the added one', async () => {
    await cluster.stop()
    expect(cluster.nodes.filter((node) => !exited(node))).toEqual([])
    await expect(redisCommand(cluster.nodes[6].url, 'PING')).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })
})

describe('startCluster with TLS, client certificates required and a password', () => {
  let cluster
  let certs
  beforeAll(async () => {
    certs = await makeCertificates()
    cluster = await startCluster({ masters: 3, replicas: 0, tls: { certs, authClients: 'yes' }, password: 'pw' })
  }, START_TIMEOUT_MS)
  afterAll(() => cluster?.stop())

  test('its seeds are TLS ports that redirect TLS clients to TLS ports', async () => {
    expect(cluster.seeds).toEqual(cluster.nodes.map((node) => `rediss://:pw@127.0.0.1:${node.tlsPort}`))
    expect(cluster.urls).toEqual(cluster.nodes.map((node) => `redis://:pw@127.0.0.1:${node.port}`))
    const withCert = { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey }
    const key = 'harness:{tls}'
    const master = await cluster.masterOf(key)
    const other = cluster.nodes.find((node) => node !== master)
    expect(await tlsRequest(master.tlsPort, withCert, ['SET', key, 'v'])).toMatch(/^-NOAUTH/)
    expect(await tlsRequest(master.tlsPort, withCert, ['AUTH', 'pw'], ['SET', key, 'v'])).toBe('+OK')
    const slot = await redisCommand(master.inspectUrl, 'CLUSTER', 'KEYSLOT', key)
    const redirect = await tlsRequest(other.tlsPort, withCert, ['AUTH', 'pw'], ['GET', key])
    expect(redirect).toBe(`-MOVED ${slot} 127.0.0.1:${master.tlsPort}`)
    for (const url of cluster.urls) {
      expect(await redisCommand(url, 'CLUSTER', 'INFO')).toContain('cluster_state:ok\r\n')
    }
  })
})

describe('startSentinel', () => {
  let deployment
  beforeAll(async () => {
    deployment = await startSentinel({ masterPassword: 'master secret', sentinelPassword: 'sentinel secret' })
  }, START_TIMEOUT_MS)
  afterAll(() => deployment?.stop())

  test('the sentinels report the master; sentinel and master passwords differ', async () => {
    const { master, replica, sentinels, urls, name } = deployment
    expect(sentinels).toHaveLength(3)
    expect(urls).toEqual(sentinels.map((s) => `redis://:sentinel%20secret@127.0.0.1:${s.port}`))
    expect(await deployment.currentMasterPort()).toBe(master.port)
    for (const url of urls) {
      expect(await redisCommand(url, 'SENTINEL', 'get-master-addr-by-name', name)).toEqual([
        '127.0.0.1',
        String(master.port),
      ])
      expect(await redisCommand(url, 'SENTINEL', 'sentinels', name)).toHaveLength(2)
    }
    const sentinelUrl = `redis://127.0.0.1:${sentinels[0].port}`
    await expect(redisCommand(sentinelUrl, 'PING')).rejects.toThrow(/^NOAUTH/)
    await expect(redisCommand(`redis://:master%20secret@127.0.0.1:${sentinels[0].port}`, 'PING')).rejects.toThrow(
      /^WRONGPASS/,
    )
    await expect(redisCommand(master.url, 'PING')).rejects.toThrow(/^NOAUTH/)
    expect((await redisCommand(replica.inspectUrl, 'ROLE')).slice(0, 3)).toEqual(['slave', '127.0.0.1', master.port])
  })

  test(
    'a killed master fails over to the replica (waitForFailover)',
    async () => {
      const { master, replica } = deployment
      await master.kill()
      expect(await deployment.waitForFailover(master.port)).toBe(replica.port)
      expect(await deployment.currentMasterPort()).toBe(replica.port)
      expect((await redisCommand(replica.inspectUrl, 'ROLE'))[0]).toBe('master')
    },
    FAILOVER_TIMEOUT_MS,
  )

  test('stop() ends the sentinels, the master and the replica', async () => {
    await deployment.stop()
    const all = [deployment.master, deployment.replica, ...deployment.sentinels]
    expect(all.filter((node) => !exited(node))).toEqual([])
  })
})

describe('startSentinel with TLS', () => {
  let deployment
  let certs
  beforeAll(async () => {
    certs = await makeCertificates()
    deployment = await startSentinel({ sentinelPassword: 'pw', tls: { certs, authClients: 'yes' } })
  }, START_TIMEOUT_MS)
  afterAll(() => deployment?.stop())

  test('sentinels on TLS ports report the TLS master and fail over to the TLS replica', async () => {
    const { master, replica, sentinels, urls, name } = deployment
    expect(urls).toEqual(sentinels.map((s) => `rediss://:pw@127.0.0.1:${s.tlsPort}`))
    const withCert = { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey }
    expect(await tlsRequest(sentinels[0].tlsPort, withCert, ['AUTH', 'pw'], ['PING'])).toBe('+PONG')
    await expect(tlsRequest(sentinels[0].tlsPort, { ca: certs.ca }, ['AUTH', 'pw'], ['PING'])).rejects.toThrow(
      CERT_REQUIRED,
    )
    expect(await redisCommand(sentinels[0].inspectUrl, 'SENTINEL', 'replicas', name)).toHaveLength(1)
    expect(await deployment.currentMasterPort()).toBe(master.tlsPort)
    await master.kill()
    expect(await deployment.waitForFailover(master.tlsPort)).toBe(replica.tlsPort)
  }, FAILOVER_TIMEOUT_MS)
})
