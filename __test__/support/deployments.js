'use strict'
// Real Redis deployments for tests, on 127.0.0.1 and free ports, built from ./redis-server: TLS servers (with test
// certificates made by openssl), Redis Cluster (redis-cli --cluster) and Sentinel. No mocks, no npm packages.

const { execFile, execFileSync, spawn } = require('node:child_process')
const crypto = require('node:crypto')
const fs = require('node:fs')
const os = require('node:os')
const net = require('node:net')
const path = require('node:path')

const { startRedis, redisCommand, freePort } = require('./redis-server')

const CERT_DAYS = 30
const START_ATTEMPTS = 3
const WAIT_TIMEOUT_MS = 30_000
const POLL_INTERVAL_MS = 50
const PROBE_TIMEOUT_MS = 1000
const CLI_TIMEOUT_MS = 60_000
const MIGRATE_BATCH = 100
const MIGRATE_TIMEOUT_MS = 5000
const CLUSTER_SLOTS = 16384
// A master waits repl-diskless-sync-delay (5 s) for more replicas before a full sync; a replica that never synced
// refuses to fail over (its data is too old), so replicas should sync at once.
const REPLICATION_ARGS = ['--repl-diskless-sync-delay', '0']

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------------------------
// Certificates

// Extensions of the test PKI: X.509 v3 CAs with keyUsage, leaves with SAN and extendedKeyUsage (rustls and OpenSSL).
// The server certificate also allows clientAuth: redis-server presents it as its client certificate when it connects
// to another node over TLS (replication, the cluster bus, sentinel links).
const OPENSSL_CONFIG = `
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:localhost, DNS:redis.test
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
[client]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
`

let certificates = null

/**
 * Test certificates made by openssl in a fresh temp dir (removed when this process exits), made once per process:
 * resolves `{ dir, ca, serverCert, serverKey, clientCert, clientKey, otherCa, paths }` with PEM strings and, in
 * `paths`, their files. The server certificate (signed by `ca`) names IP:127.0.0.1, DNS:localhost and DNS:redis.test;
 * the client certificate (signed by `ca`) is for clientAuth; `otherCa` is an unrelated CA that signed nothing.
 */
function makeCertificates() {
  certificates ??= generateCertificates().catch((err) => {
    certificates = null
    throw err
  })
  return certificates
}

/** Run openssl to make the files of makeCertificates(). */
async function generateCertificates() {
  const dir = certificateDir('redis-snatch-certs-', OPENSSL_CONFIG)
  const file = (name) => path.join(dir, name)
  const { selfSigned, signed } = certificateMaker(dir)
  await Promise.all([
    selfSigned('ca', 'redis-snatch test CA', 'ca'),
    selfSigned('other-ca', 'redis-snatch unrelated test CA', 'ca'),
  ])
  await Promise.all([
    signed('server', 'localhost', { extensions: 'server' }),
    signed('client', 'redis-snatch test client', { extensions: 'client' }),
  ])
  const paths = {
    ca: file('ca.crt'),
    serverCert: file('server.crt'),
    serverKey: file('server.key'),
    clientCert: file('client.crt'),
    clientKey: file('client.key'),
    otherCa: file('other-ca.crt'),
  }
  const pem = Object.fromEntries(Object.entries(paths).map(([name, p]) => [name, fs.readFileSync(p, 'utf8')]))
  return { dir, ...pem, paths }
}

/** A fresh temp dir named `prefix…`, removed when this process exits, holding `config` as openssl.cnf. */
function certificateDir(prefix, config) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  removeAtExit(dir)
  fs.writeFileSync(path.join(dir, 'openssl.cnf'), config)
  return dir
}

/**
 * openssl in `dir` (of certificateDir), making EC P-256 keys and SHA-256 certificates, each as `<name>.key` and
 * `<name>.crt`: `selfSigned(name, cn, extensions)`, and `signed(name, cn, { ca, extensions, days })`, signed by
 * `ca` (default 'ca'), X.509 v3 with the config's section `extensions` or v1 without one, valid for `days` (-1: expired).
 */
function certificateMaker(dir) {
  const openssl = (...args) => run('openssl', args, { cwd: dir })
  const newKey = (name) => ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', `${name}.key`]
  const subject = (cn) => ['-subj', `/O=redis-snatch tests/CN=${cn}`]
  const selfSigned = (name, cn, extensions) =>
    openssl('req', '-x509', '-new', '-config', 'openssl.cnf', '-extensions', extensions, ...newKey(name),
      '-out', `${name}.crt`, '-days', String(CERT_DAYS), '-sha256', ...subject(cn))
  const signed = async (name, cn, { ca = 'ca', extensions = null, days = CERT_DAYS } = {}) => {
    await openssl('req', '-new', '-config', 'openssl.cnf', ...newKey(name), '-out', `${name}.csr`, ...subject(cn))
    // A random positive serial (not -CAcreateserial, whose serial file two parallel signings would share).
    const serial = crypto.randomBytes(16)
    serial[0] = (serial[0] & 0x7f) | 0x10
    const v3 = extensions ? ['-extfile', 'openssl.cnf', '-extensions', extensions] : []
    await openssl('x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.crt`, '-CAkey', `${ca}.key`,
      '-set_serial', `0x${serial.toString('hex')}`, '-days', String(days), '-sha256', ...v3, '-out', `${name}.crt`)
  }
  return { selfSigned, signed }
}

/** Remove `dir` when this process exits, also when the 'exit' hook cannot run (a tiny shell waits for our end). */
function removeAtExit(dir) {
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const guard = spawn('sh', ['-c', 'read -r _; rm -rf "$1"', 'redis-certs-guard', dir], {
    stdio: ['pipe', 'ignore', 'ignore'],
  })
  guard.unref()
  guard.stdin.unref()
}

/** Run a program and resolve its stdout; reject with its output when it fails. */
function run(command, args, opts = {}) {
  return new Promise((resolve, reject) => {
    execFile(command, args, { timeout: CLI_TIMEOUT_MS, maxBuffer: 1 << 24, ...opts }, (err, stdout, stderr) => {
      if (!err) return resolve(stdout)
      const output = `${stdout}${stderr}`.trim().split('\n').slice(-40).join('\n')
      reject(new Error(`${command} ${args.join(' ')} failed (${err.message.split('\n')[0]}):\n${output}`))
    })
  })
}

// ---------------------------------------------------------------------------------------------------------------
// Ports, TLS servers

const handedOut = new Set()

/** `count` distinct ports that are free right now and that this process has not handed out before. */
async function freePorts(count) {
  const ports = []
  while (ports.length < count) {
    const port = await freePort()
    if (handedOut.has(port)) continue
    handedOut.add(port)
    ports.push(port)
  }
  return ports
}

/**
 * startRedis on `count` fresh ports (`makeOpts(ports)` gives its options, `ports[0]` being the plaintext port), on
 * new ports again when one was taken meanwhile, or when `usable(ports)` resolves false. Resolves `{ server, ports }`.
 */
async function startOnFreePorts(count, makeOpts, usable = async () => true) {
  for (let attempt = 1; ; attempt++) {
    const ports = await freePorts(count)
    if (!(await usable(ports))) {
      attempt--
      continue
    }
    try {
      return { server: await startRedis({ ...makeOpts(ports), port: ports[0] }), ports }
    } catch (err) {
      if (!err.portTaken || attempt === START_ATTEMPTS) throw err
    }
  }
}

/** Normalize a `tls` option: true (the cached certificates), a certificates object, or `{ certs, authClients }`. */
async function tlsSettings(tls) {
  if (!tls) return null
  if (tls === true) return { certs: await makeCertificates(), authClients: 'no' }
  if (tls.paths) return { certs: tls, authClients: 'no' }
  return { certs: tls.certs || (await makeCertificates()), authClients: tls.authClients || 'no' }
}

/** redis-server arguments for a TLS listener on `tlsPort` with the test certificates. */
function tlsArgs({ certs, authClients }, tlsPort) {
  return [
    '--tls-port', String(tlsPort),
    '--tls-cert-file', certs.paths.serverCert,
    '--tls-key-file', certs.paths.serverKey,
    '--tls-ca-cert-file', certs.paths.ca,
    '--tls-auth-clients', String(authClients),
  ]
}

/**
 * Add `tlsPort` and `tlsUrl` (and `password`, `inspectUrl`, and `paused`, which pause(), resume() and restart() keep
 * up to date) to a handle of startRedis.
 */
function decorate(server, { tlsPort = null, password = null } = {}) {
  const auth = password ? `:${encodeURIComponent(password)}@` : ''
  server.password = password
  server.inspectUrl = `redis://${auth}127.0.0.1:${server.port}`
  if (tlsPort) {
    server.tlsPort = tlsPort
    server.tlsUrl = `rediss://127.0.0.1:${tlsPort}`
  }
  const { pause, resume, restart } = server
  server.paused = false
  server.pause = () => {
    server.paused = true
    return pause()
  }
  server.resume = () => {
    server.paused = false
    return resume()
  }
  server.restart = async () => {
    await restart()
    server.paused = false
  }
  return server
}

/**
 * Start a redis-server that also listens for TLS: a startRedis handle plus `tlsPort` and `tlsUrl`
 * (`rediss://127.0.0.1:<tlsPort>`), `password` and `inspectUrl` (plaintext URL with credentials, for redisCommand).
 * The plaintext `port` stays open for the harness. `certs` defaults to makeCertificates(); `authClients` is
 * 'no', 'yes' or 'optional' (tls-auth-clients); `password` sets requirepass; `binary` is the server to run (the
 * redis-server on PATH by default).
 */
async function startTlsRedis({ certs = null, authClients = 'no', args = [], password = null, binary } = {}) {
  const settings = { certs: certs || (await makeCertificates()), authClients }
  const passwordArgs = password ? ['--requirepass', password] : []
  const { server, ports } = await startOnFreePorts(2, ([, tlsPort]) => ({
    args: [...tlsArgs(settings, tlsPort), ...passwordArgs, ...args],
    password,
    binary,
  }))
  return decorate(server, { tlsPort: ports[1], password })
}

// ---------------------------------------------------------------------------------------------------------------
// Polling

/**
 * Call `check(note)` every POLL_INTERVAL_MS until it resolves a truthy value, which this resolves; `note(reason)`
 * records why not yet (as does a rejection). Rejects with `what` and the last reason after `timeoutMs`.
 */
async function waitFor(what, check, timeoutMs = WAIT_TIMEOUT_MS) {
  const deadline = Date.now() + timeoutMs
  let reason = 'no check finished'
  const note = (why) => {
    reason = why
  }
  for (;;) {
    try {
      const value = await check(note)
      if (value) return value
    } catch (err) {
      reason = err.message
    }
    if (Date.now() >= deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${reason}`)
    await sleep(POLL_INTERVAL_MS)
  }
}

/** One command with a short timeout, for polling (`node` is a handle with `inspectUrl` or `url`). */
function probe(node, ...args) {
  return redisCommand({ url: node.inspectUrl || node.url, timeout: PROBE_TIMEOUT_MS }, ...args)
}

/** True unless the handle's process has exited or is paused. */
function alive(node) {
  return !node.paused && node.process.exitCode === null && node.process.signalCode === null
}

/** Parse INFO text into an object. */
function parseInfo(text) {
  const info = {}
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':')
    if (at > 0 && !line.startsWith('#')) info[line.slice(0, at)] = line.slice(at + 1)
  }
  return info
}

/** Turn a flat [field, value, ...] reply into an object. */
function pairs(list) {
  const object = {}
  for (let i = 0; i + 1 < list.length; i += 2) object[list[i]] = list[i + 1]
  return object
}

/** Stop every handle, ignoring ones that fail to stop. */
async function stopAll(handles) {
  await Promise.all(handles.map((handle) => handle.stop().catch(() => {})))
}

// ---------------------------------------------------------------------------------------------------------------
// Cluster

/** Parse CLUSTER NODES into `[{ id, address, flags, master, slots }]` (slots as [start, end]; markers dropped). */
function parseClusterNodes(text) {
  return text
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, address, flags, master, , , , , ...slotFields] = line.split(' ')
      const slots = slotFields
        .filter((field) => !field.startsWith('['))
        .map((field) => field.split('-').map(Number))
        .map(([start, end = start]) => [start, end])
      return { id, address, flags: flags.split(','), master, slots }
    })
}

/** True if CLUSTER NODES flags say the node is failing, unreachable or not yet known. */
function isFailing(flags) {
  return ['fail', 'fail?', 'handshake', 'noaddr'].some((flag) => flags.includes(flag))
}

/**
 * Start a Redis Cluster of `masters` masters with `replicas` replicas each (6 nodes by default) and wait until every
 * node reports cluster_state:ok and all agree on the slot map and the members. `tls` (true, a certificates object or
 * `{ certs, authClients }`) makes the nodes, the cluster bus and replication use TLS (plaintext ports stay open for
 * the harness); `password` sets requirepass and masterauth on every node; `binary` is the server every node runs (the
 * redis-server on PATH by default). Resolves a handle:
 * - `nodes`: node handles (startRedis handles plus `id`, `busPort`, `password`, `inspectUrl`, `paused`, and
 *   `tlsPort`/`tlsUrl` with TLS), including those addNode() adds; restart() brings a node back empty, out of the
 *   cluster;
 * - `seeds`: the URLs a client uses (redis:// or, with TLS, rediss:// TLS ports; with the password), `urls`:
 *   plaintext URLs with the password for redisCommand;
 * - `masterOf(key)`, `replicaOf(node)`, `masters()`, `nodeById(id)`, `slotOf(key)`, `waitUntilStable()`,
 *   `waitForFailover(killedNode)`, `addNode()`, `migrateSlot(slot, toNode, opts)`, `stop()`.
 */
async function startCluster({
  masters = 3,
  replicas = 1,
  nodeTimeout = 1000,
  tls = null,
  password = null,
  args = [],
  binary = 'redis-server',
} = {}) {
  const settings = { tls: await tlsSettings(tls), nodeTimeout, password, args, binary }
  const nodes = []
  const cliAuth = password ? ['-a', password, '--no-auth-warning'] : []
  const cli = (...cliArgs) => run('redis-cli', [...cliTlsArgs(settings.tls), ...cliAuth, ...cliArgs])
  const auth = password ? `:${encodeURIComponent(password)}@` : ''
  const address = (node) => `127.0.0.1:${settings.tls ? node.tlsPort : node.port}`
  const clientPort = (node) => (settings.tls ? node.tlsPort : node.port)

  /** The live nodes. */
  const liveNodes = () => nodes.filter(alive)

  /** The handle of the node with cluster id `id` (undefined if none). */
  const nodeById = (id) => nodes.find((node) => node.id === id)

  /** Ask the live nodes in turn until one answers. */
  async function ask(...command) {
    let lastError = new Error('no live cluster node')
    for (const node of liveNodes()) {
      try {
        return await probe(node, ...command)
      } catch (err) {
        lastError = err
      }
    }
    throw lastError
  }

  /** The slot map one node has: `[{ start, end, master }]` with master ids, sorted. */
  async function slotMap(node) {
    const reply = await probe(node, 'CLUSTER', 'SLOTS')
    return reply.map(([start, end, master]) => ({ start, end, master: master[2] })).sort((a, b) => a.start - b.start)
  }

  /**
   * Resolve true once every live node (but `gone`) reports cluster_state:ok, covers all slots, every live replica has
   * synced, and all share one slot map and one view of the healthy members, which include every live node (`note`
   * says what is still missing); with `gone`, also once no live node sees `gone` serving slots.
   */
  async function stable(note, { gone = null } = {}) {
    const live = liveNodes().filter((node) => node !== gone)
    let reference = null
    for (const node of live) {
      const info = parseInfo(await probe(node, 'CLUSTER', 'INFO'))
      if (info.cluster_state !== 'ok') return note(`${address(node)} reports cluster_state:${info.cluster_state}`)
      const map = await slotMap(node)
      const covered = map.reduce((sum, range) => sum + range.end - range.start + 1, 0)
      if (covered !== CLUSTER_SLOTS) return note(`${address(node)} covers ${covered} slots`)
      if (gone && map.some((range) => range.master === gone.id)) {
        return note(`${address(node)} still has ${address(gone)} serving slots`)
      }
      const members = parseClusterNodes(await probe(node, 'CLUSTER', 'NODES'))
        .filter((member) => !isFailing(member.flags))
        .map((member) => `${member.id} ${member.flags.includes('master') ? 'master' : `replica-of-${member.master}`}`)
        .sort()
      const missing = live.find((other) => !members.some((member) => member.startsWith(`${other.id} `)))
      if (missing) return note(`${address(node)} does not list ${address(missing)} as a healthy member`)
      const replication = parseInfo(await probe(node, 'INFO', 'replication'))
      if (replication.role === 'slave' && replication.master_link_status !== 'up') {
        return note(`${address(node)} has not synced with its master (a replica that never synced cannot fail over)`)
      }
      const view = JSON.stringify({ map, members })
      if (reference === null) reference = view
      else if (view !== reference) return note(`${address(node)} and ${address(live[0])} disagree on the cluster`)
    }
    return true
  }

  /** Wait until the cluster is stable (see stable()). */
  const waitUntilStable = (what = 'the cluster to be ok and agreed', opts) =>
    waitFor(what, (note) => stable(note, opts))

  /** The slot of `key` (CLUSTER KEYSLOT). */
  const slotOf = (key) => ask('CLUSTER', 'KEYSLOT', key)

  /** The node handle that serves `slot` as master, as a live node sees it. */
  async function masterOfSlot(slot) {
    for (const node of liveNodes()) {
      let map
      try {
        map = await slotMap(node)
      } catch {
        continue
      }
      const range = map.find(({ start, end }) => start <= slot && slot <= end)
      if (!range) throw new Error(`slot ${slot} is not served according to ${address(node)}`)
      return nodeById(range.master)
    }
    throw new Error('no live cluster node answered CLUSTER SLOTS')
  }

  /** The handles of the nodes that are masters now, as a live node sees it. */
  async function currentMasters() {
    const members = parseClusterNodes(await ask('CLUSTER', 'NODES'))
    return members
      .filter((member) => member.flags.includes('master') && !isFailing(member.flags))
      .map((member) => nodeById(member.id))
      .filter(Boolean)
  }

  const handle = {
    nodes,
    get seeds() {
      return nodes.map((node) => `${settings.tls ? 'rediss' : 'redis'}://${auth}${address(node)}`)
    },
    get urls() {
      return nodes.map((node) => node.inspectUrl)
    },
    nodeById,
    slotOf,
    masters: currentMasters,
    waitUntilStable: () => waitUntilStable(),
    /** The node handle that currently serves `key`'s slot as master. */
    masterOf: async (key) => masterOfSlot(await slotOf(key)),
    /** A healthy replica of `node` (a handle), or null. */
    async replicaOf(node) {
      const members = parseClusterNodes(await ask('CLUSTER', 'NODES'))
      const replica = members.find((member) => member.master === node.id && !isFailing(member.flags))
      return (replica && nodeById(replica.id)) || null
    },
    /**
     * Resolve once `killedNode` (killed or paused) serves no slots in any other live node's view and those are ok and
     * agreed again (a replica took over); rejects after WAIT_TIMEOUT_MS.
     */
    waitForFailover: (killedNode) =>
      waitUntilStable(`a failover away from ${address(killedNode)}`, { gone: killedNode }),
    /** Start one more empty node, join it as a master (redis-cli --cluster add-node) and wait until all know it. */
    async addNode() {
      const node = await startClusterNode(settings)
      nodes.push(node)
      const existing = liveNodes().find((other) => other !== node)
      await cli('--cluster', 'add-node', address(node), address(existing))
      await waitUntilStable(`all nodes to know the added node ${address(node)}`)
      return node
    },
    /**
     * Move `slot` with its keys from its master to `toNode` (a master): IMPORTING on the target, MIGRATING on the
     * source, MIGRATE of its keys in batches, then SETSLOT NODE on the target, the source and the other masters.
     * `opts.beforeAssign({ slot, source, target, moved })` runs after the keys moved and before the slot is assigned
     * (clients get ASK then). Resolves `{ slot, source, target, moved }` once all nodes agree on the new owner.
     */
    async migrateSlot(slot, toNode, opts = {}) {
      const source = await masterOfSlot(slot)
      const result = { slot, source, target: toNode, moved: 0 }
      if (source === toNode) return result
      await probe(toNode, 'CLUSTER', 'SETSLOT', slot, 'IMPORTING', source.id)
      await probe(source, 'CLUSTER', 'SETSLOT', slot, 'MIGRATING', toNode.id)
      for (;;) {
        const keys = await probe(source, 'CLUSTER', 'GETKEYSINSLOT', slot, MIGRATE_BATCH)
        if (keys.length === 0) break
        // MIGRATE connects like a client (over TLS when tls-cluster is on), so it needs the client port.
        const migrate = ['MIGRATE', '127.0.0.1', clientPort(toNode), '', 0, MIGRATE_TIMEOUT_MS]
        if (password) migrate.push('AUTH', password)
        migrate.push('KEYS', ...keys)
        await redisCommand({ url: source.inspectUrl, timeout: MIGRATE_TIMEOUT_MS * 2 }, ...migrate)
        result.moved += keys.length
      }
      if (opts.beforeAssign) await opts.beforeAssign(result)
      const others = (await currentMasters()).filter((node) => node !== toNode && node !== source)
      for (const node of [toNode, source, ...others]) {
        await probe(node, 'CLUSTER', 'SETSLOT', slot, 'NODE', toNode.id)
      }
      await waitFor(`all nodes to agree that ${address(toNode)} serves slot ${slot}`, async (note) => {
        if (!(await stable(note))) return false
        const owner = await masterOfSlot(slot)
        return owner === toNode || note(`slot ${slot} is still served by ${address(owner)}`)
      })
      return result
    },
    /** Stop every node, also added ones. */
    stop: () => stopAll(nodes),
  }

  try {
    for (let i = 0; i < masters * (1 + replicas); i++) nodes.push(await startClusterNode(settings))
    const addresses = nodes.map(address)
    await cli('--cluster', 'create', ...addresses, '--cluster-replicas', String(replicas), '--cluster-yes')
    await waitUntilStable()
    const roles = parseClusterNodes(await ask('CLUSTER', 'NODES'))
    const masterCount = roles.filter((member) => member.flags.includes('master')).length
    if (masterCount !== masters) throw new Error(`the cluster has ${masterCount} masters, not ${masters}`)
  } catch (err) {
    await stopAll(nodes)
    throw err
  }
  return handle
}

/** redis-cli arguments for TLS with the test certificates (none without `tls`). */
function cliTlsArgs(tls) {
  if (!tls) return []
  const { paths } = tls.certs
  return ['--tls', '--cacert', paths.ca, '--cert', paths.clientCert, '--key', paths.clientKey]
}

/** The major version of the server `binary` (the redis-server on PATH by default), by binary. */
const serverMajors = new Map()
function redisServerMajor(binary = 'redis-server') {
  if (!serverMajors.has(binary)) {
    serverMajors.set(binary, Number(/v=(\d+)\./.exec(execFileSync(binary, ['--version'], { encoding: 'utf8' }))?.[1]))
  }
  return serverMajors.get(binary)
}

/** Whether 127.0.0.1:`port` can be listened on now. */
function canListen(port) {
  return new Promise((resolve) => {
    const probe = net.createServer()
    probe.once('error', () => resolve(false))
    probe.listen(port, '127.0.0.1', () => probe.close(() => resolve(true)))
  })
}

/** A cluster bus port before Redis 7 (which has no `cluster-port`): the node's port + 10000. */
const FIXED_BUS_OFFSET = 10000

/** Start one empty cluster node (cluster bus on its own free port) and read its id. */
async function startClusterNode({ tls, nodeTimeout, password, args, binary }) {
  const fixedBus = redisServerMajor(binary) < 7
  const busFree = async ([port]) => !fixedBus || (port + FIXED_BUS_OFFSET <= 65535 && (await canListen(port + FIXED_BUS_OFFSET)))
  const { server, ports } = await startOnFreePorts(tls ? 3 : 2, ([, busPort, tlsPort]) => ({
    args: [
      '--cluster-enabled', 'yes',
      '--cluster-node-timeout', String(nodeTimeout),
      '--cluster-config-file', 'nodes.conf',
      ...(fixedBus ? [] : ['--cluster-port', String(busPort)]),
      ...REPLICATION_ARGS,
      ...(password ? ['--requirepass', password, '--masterauth', password] : []),
      ...(tls ? [...tlsArgs(tls, tlsPort), '--tls-cluster', 'yes', '--tls-replication', 'yes'] : []),
      ...args,
    ],
    password,
    binary,
  }), busFree)
  const node = decorate(server, { tlsPort: tls ? ports[2] : null, password })
  node.busPort = fixedBus ? node.port + FIXED_BUS_OFFSET : ports[1]
  try {
    node.id = await redisCommand(node.inspectUrl, 'CLUSTER', 'MYID')
  } catch (err) {
    await node.stop()
    throw err
  }
  return node
}

// ---------------------------------------------------------------------------------------------------------------
// Sentinel

/** Quote a value for a redis config file. */
function quote(value) {
  return `"${String(value).replace(/[\\"]/g, (c) => `\\${c}`)}"`
}

/**
 * Start a master, one replica and `sentinels` sentinels monitoring them as `name` (quorum: a majority), and wait
 * until every sentinel knows the master, the replica and the other sentinels. `masterPassword` sets requirepass
 * (and masterauth) on master and replica and auth-pass on the sentinels; `sentinelPassword` is the sentinels' own
 * requirepass (and sentinel-pass, so they can talk to each other). `tls` (true, a certificates object or
 * `{ certs, authClients }`) puts everything on TLS ports too, with tls-replication so sentinels and the replica use
 * TLS. Resolves `{ master, replica, sentinels, urls, name, currentMasterPort(), waitForFailover(oldPort), stop() }`
 * (master, replica and sentinels are startRedis handles plus `password`, `inspectUrl`, and `tlsPort`/`tlsUrl`);
 * `urls` are the sentinels' URLs with credentials; ports reported by sentinels are the TLS ports with `tls`.
 */
async function startSentinel({
  name = 'mymaster',
  sentinels: sentinelCount = 3,
  downAfter = 1000,
  masterPassword = null,
  sentinelPassword = null,
  tls = null,
} = {}) {
  const settings = await tlsSettings(tls)
  const started = []
  let master
  let replica
  let sentinelHandles
  const clientPort = (node) => (settings ? node.tlsPort : node.port)
  const dataArgs = [...REPLICATION_ARGS]
  if (masterPassword) dataArgs.push('--requirepass', masterPassword, '--masterauth', masterPassword)
  if (settings) dataArgs.push('--tls-replication', 'yes')

  /** Start a master or replica (TLS too with `tls`). */
  async function startData(args) {
    const server = settings
      ? await startTlsRedis({ ...settings, args: [...dataArgs, ...args], password: masterPassword })
      : decorate(await startRedis({ args: [...dataArgs, ...args], password: masterPassword }), {
          password: masterPassword,
        })
    started.push(server)
    return server
  }

  /** Start one sentinel with its config file. */
  async function startOneSentinel() {
    const { server, ports } = await startOnFreePorts(settings ? 2 : 1, ([, tlsPort]) => {
      const lines = [
        `sentinel monitor ${name} 127.0.0.1 ${clientPort(master)} ${Math.floor(sentinelCount / 2) + 1}`,
        `sentinel down-after-milliseconds ${name} ${downAfter}`,
        `sentinel failover-timeout ${name} 10000`,
      ]
      if (masterPassword) lines.push(`sentinel auth-pass ${name} ${quote(masterPassword)}`)
      if (sentinelPassword) {
        // Sentinels fall back to their requirepass to reach each other, but say so explicitly.
        lines.push(`requirepass ${quote(sentinelPassword)}`, `sentinel sentinel-pass ${quote(sentinelPassword)}`)
      }
      if (settings) {
        const { certs, authClients } = settings
        lines.push(
          `tls-port ${tlsPort}`,
          `tls-cert-file ${quote(certs.paths.serverCert)}`,
          `tls-key-file ${quote(certs.paths.serverKey)}`,
          `tls-ca-cert-file ${quote(certs.paths.ca)}`,
          `tls-auth-clients ${authClients}`,
          'tls-replication yes',
        )
      }
      return { config: lines.join('\n'), args: ['--sentinel'], password: sentinelPassword }
    })
    const sentinel = decorate(server, { tlsPort: settings ? ports[1] : null, password: sentinelPassword })
    started.push(sentinel)
    return sentinel
  }

  try {
    master = await startData([])
    replica = await startData(['--replicaof', '127.0.0.1', String(clientPort(master))])
    // Sentinels list the replicas from the master's INFO, which they ask for as soon as they connect.
    await waitFor('the replica to sync with the master', async (note) => {
      const info = parseInfo(await probe(master, 'INFO', 'replication'))
      if (info.slave0 && info.slave0.includes('state=online')) return true
      return note(`master INFO replication: connected_slaves:${info.connected_slaves} slave0:${info.slave0}`)
    })
    sentinelHandles = await Promise.all(Array.from({ length: sentinelCount }, startOneSentinel))
    await waitFor('every sentinel to know the master, the replica and the other sentinels', async (note) => {
      for (const sentinel of sentinelHandles) {
        const where = `sentinel 127.0.0.1:${sentinel.port}`
        const addr = await probe(sentinel, 'SENTINEL', 'get-master-addr-by-name', name)
        if (!addr || Number(addr[1]) !== clientPort(master)) return note(`${where} reports master ${addr}`)
        const replicas = (await probe(sentinel, 'SENTINEL', 'replicas', name)).map(pairs)
        const known = replicas.find((r) => Number(r.port) === clientPort(replica))
        if (!known || /s_down|disconnected/.test(known.flags)) {
          return note(`${where} knows replicas ${JSON.stringify(replicas.map((r) => [r.port, r.flags]))}`)
        }
        const peers = await probe(sentinel, 'SENTINEL', 'sentinels', name)
        if (peers.length !== sentinelCount - 1) return note(`${where} knows ${peers.length} other sentinels`)
      }
      return true
    })
  } catch (err) {
    await stopAll(started)
    throw err
  }

  /** The master port one sentinel reports (the first that answers). */
  async function currentMasterPort() {
    let lastError = new Error('no live sentinel')
    for (const sentinel of sentinelHandles.filter(alive)) {
      try {
        const addr = await probe(sentinel, 'SENTINEL', 'get-master-addr-by-name', name)
        return Number(addr[1])
      } catch (err) {
        lastError = err
      }
    }
    throw lastError
  }

  const scheme = settings ? 'rediss' : 'redis'
  const auth = sentinelPassword ? `:${encodeURIComponent(sentinelPassword)}@` : ''
  return {
    name,
    master,
    replica,
    sentinels: sentinelHandles,
    urls: sentinelHandles.map((s) => `${scheme}://${auth}127.0.0.1:${clientPort(s)}`),
    currentMasterPort,
    /**
     * Resolve the new master's port once a sentinel reports a master other than `oldMasterPort` and that server
     * answers ROLE as master; by default also once every live sentinel reports it (they learn of a failover a moment
     * apart), unless `opts.allSentinels` is false. Rejects after WAIT_TIMEOUT_MS.
     */
    waitForFailover: (oldMasterPort, { allSentinels = true } = {}) =>
      waitFor(`the sentinels to fail over from port ${oldMasterPort}`, async (note) => {
        const reported = []
        for (const sentinel of sentinelHandles.filter(alive)) {
          const addr = await probe(sentinel, 'SENTINEL', 'get-master-addr-by-name', name).catch(() => null)
          reported.push(addr && Number(addr[1]))
        }
        const port = reported.find((p) => p && p !== oldMasterPort)
        if (!port) return note(`no sentinel reports a master other than port ${oldMasterPort}`)
        if (allSentinels && reported.some((p) => p !== port)) return note(`the sentinels report ports ${reported}`)
        const server = [master, replica].find((node) => clientPort(node) === port)
        if (!server) return note(`a sentinel reports the unknown master port ${port}`)
        const role = await probe(server, 'ROLE')
        return role[0] === 'master' ? port : note(`the sentinels report port ${port}, whose ROLE is ${role[0]}`)
      }),
    /** Stop the sentinels, the master and the replica. */
    stop: () => stopAll(started),
  }
}

/**
 * Resolves once every replica of the master at `url` (a redis:// URL for inspection) has acknowledged the master's
 * whole replication stream, which must hold some write: the master counts a replica for WAIT only once it
 * acknowledges, which a replica does only after it has loaded its initial sync.
 */
function replicasCaughtUp(url) {
  return waitFor(`the replicas of ${url} to acknowledge its writes`, async (note) => {
    const info = await redisCommand(url, 'INFO', 'replication')
    const written = Number(/master_repl_offset:(\d+)/.exec(info)?.[1] ?? 0)
    const acked = [...info.matchAll(/slave\d+:.*state=online,offset=(\d+)/g)].map((m) => Number(m[1]))
    if (written > 0 && acked.length > 0 && acked.every((offset) => offset >= written)) return true
    return note(`written ${written}, acknowledged ${acked.join(', ') || 'by no online replica'}`)
  })
}

module.exports = {
  makeCertificates,
  OPENSSL_CONFIG,
  certificateDir,
  certificateMaker,
  startTlsRedis,
  startCluster,
  startSentinel,
  freePorts,
  waitFor,
  replicasCaughtUp,
  redisServerMajor,
}
