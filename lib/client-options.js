'use strict'
// `createLocker({ client })`: the connection settings of a client the user already configured (ioredis `Redis` or
// `Cluster`, a node-redis client or cluster), as LockerOptions. Only settings are read: the locker opens connections of
// its own (its renewals run on a native thread, which cannot share a JS client's socket) and never uses, closes or
// waits on the user's client. A setting that changes where or how to connect and that the locker cannot carry over is
// an error naming it; the client's behaviour (retries, queues, pipelining, key prefixes) is its own.

const { invalidArg } = require('./errors')

/** The TLS settings carried over; they are LockerOptions' `tls`. */
const TLS_KEYS = ['ca', 'cert', 'key', 'servername', 'rejectUnauthorized']
/** node-redis `socket` settings that are not TLS settings and do not change where the client connects. */
const NODE_REDIS_SOCKET_KEYS = [
  'host', 'port', 'tls', 'family', 'connectTimeout', 'socketTimeout', 'noDelay', 'keepAlive', 'keepAliveInitialDelay',
  'reconnectStrategy',
]

/**
 * The LockerOptions (`url`, `cluster` or `sentinel`, and `tls`, `username`, `password` when set) that connect where
 * and as `client` does.
 */
function clientOptions(client) {
  if (client === null || typeof client !== 'object') {
    throw invalidArg(TypeError, `client must be an ioredis or node-redis client, got ${client === null ? 'null' : `a ${typeof client}`}`)
  }
  if (typeof client.status === 'string' && typeof client.isCluster === 'boolean') {
    return client.isCluster ? ioredisCluster(client) : ioredis(client.options)
  }
  if (typeof client.isOpen === 'boolean') {
    if (typeof client.getSentinelNode === 'function') {
      throw cannot('a node-redis sentinel client', 'its settings', 'they are private to it; give sentinel: { urls, name } instead')
    }
    if (Array.isArray(client._options?.rootNodes)) return nodeRedisCluster(client._options)
    if (client.options !== null && typeof client.options === 'object') return nodeRedis(client.options)
  }
  throw invalidArg(TypeError, 'client must be an ioredis Redis or Cluster, or a node-redis client or cluster (createClient, createCluster)')
}

/** An ioredis `Redis`'s options: one server, or the sentinels of a master. */
function ioredis(o) {
  if (o.path) throw cannot('client', 'path', 'the locker connects over TCP, not a Unix socket')
  if (o.natMap && Object.keys(o.natMap).length > 0) throw cannot('client', 'natMap', 'the locker uses the addresses the servers announce')
  if (o.Connector) throw cannot('client', 'Connector', 'a custom connector cannot be carried over')
  const credentials = { username: o.username || undefined, password: o.password || undefined }
  if (!Array.isArray(o.sentinels) || o.sentinels.length === 0) {
    const tls = ioredisTls('client', o.tls)
    return { url: url(tls, o.host, o.port, o.db), tls: tls ?? undefined, ...credentials }
  }
  if (o.role && o.role !== 'master') throw cannot('client', `role '${o.role}'`, 'locks are taken on the master')
  if (o.db) throw cannot('client', 'db', 'the locker uses database 0 behind sentinels')
  const sentinelTls = ioredisTls('client', o.sentinelTLS)
  const masterTls = o.enableTLSForSentinelMode ? ioredisTls('client', o.tls) ?? {} : null
  if (Boolean(sentinelTls) !== Boolean(masterTls)) {
    throw cannot('client', sentinelTls ? 'sentinelTLS' : 'enableTLSForSentinelMode', 'the locker uses TLS for both the sentinels and the master, or for neither')
  }
  const auth = o.sentinelPassword ? `${encodeURIComponent(o.sentinelUsername ?? '')}:${encodeURIComponent(o.sentinelPassword)}@` : ''
  const urls = o.sentinels.map((s) => url(sentinelTls, s.host, s.port, 0, auth))
  return { sentinel: { urls, name: o.name }, tls: masterTls ?? undefined, ...credentials }
}

/** An ioredis `Cluster`: its startup nodes, and the servers' options (`redisOptions`). */
function ioredisCluster(cluster) {
  const o = cluster.options
  if (o.natMap && Object.keys(o.natMap).length > 0) throw cannot('client', 'natMap', 'the locker uses the addresses the nodes announce')
  const r = o.redisOptions ?? {}
  if (r.path) throw cannot('client', 'redisOptions.path', 'the locker connects over TCP, not a Unix socket')
  const tls = ioredisTls('client', r.tls, 'redisOptions.tls')
  const nodes = cluster.startupNodes.map((node) => {
    if (typeof node === 'number') return url(tls, undefined, node)
    if (typeof node === 'string') {
      if (/^rediss?:\/\//.test(node)) {
        const { hostname, port } = new URL(node)
        return url(tls, hostname.replace(/^\[|\]$/g, ''), port || undefined)
      }
      const [, host, port] = /^(.*?)(?::(\d+))?$/.exec(node)
      return url(tls, host || undefined, port)
    }
    return url(tls, node.host, node.port)
  })
  return { cluster: nodes, tls: tls ?? undefined, username: r.username || undefined, password: r.password || undefined }
}

/** ioredis' `tls` (true or tls.connect's options) as LockerOptions' `tls`; null for none. */
function ioredisTls(what, tls, name = 'tls') {
  if (!tls) return null
  if (tls === true) return {}
  return pickTls(what, tls, name, Object.keys(tls))
}

/** A node-redis client's options (node-redis parsed its `url` into these). */
function nodeRedis(o) {
  const socket = o.socket ?? {}
  return {
    url: url(nodeRedisTls('client', socket), socket.host, socket.port, o.database),
    tls: nodeRedisTls('client', socket) ?? undefined,
    ...nodeRedisCredentials(o),
  }
}

/** A node-redis cluster's options: its root nodes, and the `defaults` of every node. */
function nodeRedisCluster(o) {
  const defaults = o.defaults ?? {}
  const tls = nodeRedisTls('client', defaults.socket ?? {}, 'defaults.socket')
  const nodes = o.rootNodes.map((node) => {
    if (node.url !== undefined) {
      const { hostname, port } = new URL(node.url)
      return url(tls, hostname.replace(/^\[|\]$/g, ''), port || undefined)
    }
    return url(tls, node.socket?.host, node.socket?.port)
  })
  return { cluster: nodes, tls: tls ?? undefined, ...nodeRedisCredentials(defaults) }
}

/** node-redis' `socket` as LockerOptions' `tls` (null without `tls: true`). */
function nodeRedisTls(what, socket, name = 'socket') {
  if (socket.path) throw cannot(what, `${name}.path`, 'the locker connects over TCP, not a Unix socket')
  const others = Object.keys(socket).filter((key) => !NODE_REDIS_SOCKET_KEYS.includes(key))
  if (!socket.tls) {
    const set = others.find((key) => socket[key] !== undefined)
    if (set !== undefined) throw cannot(what, `${name}.${set}`, 'it is not a setting the locker has')
    return null
  }
  return pickTls(what, socket, name, others)
}

/** node-redis' `username` and `password`; a credentials provider of the user's own cannot be carried over. */
function nodeRedisCredentials(o) {
  if (o.credentialsProvider && o.password === undefined && o.username === undefined) {
    throw cannot('client', 'credentialsProvider', 'give username and password to the locker instead')
  }
  return { username: o.username || undefined, password: o.password || undefined }
}

/** The TLS settings `keys` of `source`: TLS_KEYS are kept, any other that is set is an error. */
function pickTls(what, source, name, keys) {
  const tls = {}
  for (const key of keys) {
    if (source[key] === undefined) continue
    if (!TLS_KEYS.includes(key)) throw cannot(what, `${name}.${key}`, `the locker's TLS takes ${TLS_KEYS.join(', ')}`)
    tls[key] = source[key]
  }
  return tls
}

/**
 * A URL for `host` (default localhost) and `port` (default 6379), with TLS when `tls`, `auth` and database `db`.
 * @param {object | null} tls
 * @param {string} [host]
 * @param {string | number} [port]
 * @param {number} [db]
 * @param {string} [auth]
 */
function url(tls, host = 'localhost', port = 6379, db = 0, auth = '') {
  const name = host.includes(':') ? `[${host}]` : host
  return `${tls ? 'rediss' : 'redis'}://${auth}${name}:${port}${db ? `/${db}` : ''}`
}

/** The error for a setting `name` of `what` that cannot be carried over, and `why`. */
function cannot(what, name, why) {
  return invalidArg(TypeError, `${what}: ${name} cannot be carried over to the locker (${why})`)
}

module.exports = { clientOptions }
