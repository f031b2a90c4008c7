'use strict'
// Throwaway redis-server processes for tests, the demo and benchmarks, and a minimal RESP client to inspect them
// (no npm Redis client involved).

const { spawn } = require('node:child_process')
const fs = require('node:fs')
const net = require('node:net')
const os = require('node:os')
const path = require('node:path')

const READY_TIMEOUT_MS = 10_000
const POLL_INTERVAL_MS = 20
const BIND_ATTEMPTS = 3
const OUTPUT_LIMIT = 8192
const STOP_TIMEOUT_MS = 10_000
const COMMAND_TIMEOUT_MS = 10_000

const MISSING_SERVER_MESSAGE =
  'redis-server is required for the tests and demo; install it with `sudo apt-get install redis-server` ' +
  '(Debian/Ubuntu) or `brew install redis` (macOS), or set REDIS_URL to an existing server.'

const MISSING_TOOLS_MESSAGE = (missing) =>
  `${missing.join(' and ')} ${missing.length > 1 ? 'are' : 'is'} required for the tests of TLS, Redis Cluster and ` +
  'Sentinel deployments (certificates, cluster creation); install them with `sudo apt-get install redis-tools ' +
  'openssl` (Debian/Ubuntu) or `brew install redis openssl` (macOS).'

// Every running child and its temp dir, so none outlives this process.
const children = new Set()
const tempDirs = new Set()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true })
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Whether `command` is an executable on PATH. */
function onPath(command) {
  const dirs = (process.env.PATH || '').split(path.delimiter).filter(Boolean)
  return dirs.some((dir) => {
    try {
      fs.accessSync(path.join(dir, command), fs.constants.X_OK)
      return true
    } catch {
      return false
    }
  })
}

/** Throw an Error with install instructions unless `redis-server` is on PATH. */
function requireRedisServer() {
  if (!onPath('redis-server')) throw new Error(MISSING_SERVER_MESSAGE)
}

/** Throw an Error with install instructions unless `redis-cli` and `openssl` (the deployment tests') are on PATH. */
function requireDeploymentTools() {
  const missing = ['redis-cli', 'openssl'].filter((command) => !onPath(command))
  if (missing.length > 0) throw new Error(MISSING_TOOLS_MESSAGE(missing))
}

/**
 * Start a redis-server on 127.0.0.1 without persistence (on a free port unless `opts.port` is given; extra argv in
 * `opts.args`) and resolve a handle once it answers PING. `opts.password` is the password the server requires
 * (requirepass), sent by this readiness check; `opts.config` is the text of a config file written to the server's
 * temp dir and passed as its first argument (a sentinel needs a writable one); `opts.binary` the server to run (the
 * benchmark's Valkey 9.1), `redis-server` on PATH by default. An idle server does not keep Node's event loop alive;
 * it is killed when this process exits.
 */
async function startRedis(opts = {}) {
  const launchOpts = {
    args: opts.args || [],
    password: opts.password || null,
    config: opts.config ?? null,
    binary: opts.binary || 'redis-server',
  }
  let server
  for (let attempt = 1; ; attempt++) {
    const port = opts.port || (await freePort())
    try {
      server = await launch(port, launchOpts)
      break
    } catch (err) {
      if (opts.port || !err.portTaken || attempt === BIND_ATTEMPTS) throw err
    }
  }
  const { port } = server
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    get process() {
      return server.child
    },
    kill: (signal = 'SIGKILL') => terminate(server, signal),
    pause: () => server.child.kill('SIGSTOP'),
    resume: () => server.child.kill('SIGCONT'),
    async stop() {
      const timer = setTimeout(() => server.child.kill('SIGKILL'), STOP_TIMEOUT_MS)
      await terminate(server, 'SIGTERM')
      clearTimeout(timer)
    },
    async restart() {
      await terminate(server, 'SIGKILL')
      server = await launch(port, launchOpts)
    },
  }
}

/** Ask the kernel for a port that is free right now. */
function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address()
      probe.close(() => resolve(port))
    })
  })
}

/**
 * Spawn redis-server (in a temp dir removed when it exits) on `port` with `opts.args` (and `opts.config` as its config
 * file) and wait until that very process answers, authenticating with `opts.password` when given.
 */
async function launch(port, opts) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-snatch-'))
  tempDirs.add(dir)
  const args = []
  if (opts.config !== null) {
    const file = path.join(dir, 'redis.conf')
    fs.writeFileSync(file, `port ${port}\nbind 127.0.0.1\n${opts.config}\n`)
    args.push(file)
  }
  args.push('--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no')
  args.push('--daemonize', 'no', '--dir', dir, ...opts.args)
  const child = spawn(opts.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] })
  children.add(child)
  let output = ''
  const collect = (chunk) => {
    output = (output + chunk).slice(-OUTPUT_LIMIT)
  }
  child.stdout.setEncoding('utf8').on('data', collect)
  child.stderr.setEncoding('utf8').on('data', collect)
  const guard = child.pid && watchParent(child.pid, dir)
  const server = { port, child, exited: false }
  server.done = new Promise((resolve) => {
    const finish = () => {
      if (server.exited) return
      server.exited = true
      guard?.kill('SIGKILL')
      children.delete(child)
      tempDirs.delete(dir)
      fs.rmSync(dir, { recursive: true, force: true })
      resolve()
    }
    child.once('close', finish)
    child.once('error', (err) => {
      collect(`${err.message}\n`)
      finish()
    })
  })
  setRef(child, false)

  const deadline = Date.now() + READY_TIMEOUT_MS
  let answeredByOther = false
  while (!server.exited && Date.now() < deadline) {
    if (await ping(port, opts.password)) {
      // Another server may have taken the port just before this one tried to bind it.
      const auth = opts.password ? `:${encodeURIComponent(opts.password)}@` : ''
      const info = await redisCommand(`redis://${auth}127.0.0.1:${port}`, 'INFO', 'server').catch(() => '')
      if (info.includes(`process_id:${child.pid}\r\n`)) return server
      answeredByOther = true
      break
    }
    await sleep(POLL_INTERVAL_MS)
  }
  const reason = answeredByOther
    ? 'found its port taken by another server'
    : server.exited
      ? 'exited during startup'
      : `did not answer PING within ${READY_TIMEOUT_MS} ms`
  await terminate(server, 'SIGKILL')
  const err = new Error(`redis-server on port ${port} ${reason}; its output:\n${output}`)
  err.portTaken = answeredByOther || /address already in use/i.test(output)
  throw err
}

/**
 * Start a tiny shell that kills `pid` and removes `dir` once this process is gone (its stdin pipe closes), for when
 * the 'exit' hook cannot run: a killed process, or a Jest sandbox whose `process` is not the real one.
 */
function watchParent(pid, dir) {
  const script = 'read -r _; kill -9 "$1" 2>/dev/null; rm -rf "$2"'
  const args = ['-c', script, 'redis-server-guard', String(pid), dir]
  const guard = spawn('sh', args, { stdio: ['pipe', 'ignore', 'ignore'] })
  guard.unref()
  guard.stdin.unref()
  return guard
}

/** Let the child (and its output pipes) keep the event loop alive, or not. */
function setRef(child, ref) {
  for (const handle of [child, child.stdout, child.stderr]) {
    if (ref) handle.ref()
    else handle.unref()
  }
}

/** Send `signal` (if still running) and resolve once the process has exited. */
async function terminate(server, signal) {
  if (server.exited) return
  setRef(server.child, true)
  server.child.kill(signal)
  if (signal !== 'SIGKILL') server.child.kill('SIGCONT') // a paused server must run to handle the signal
  await server.done
}

/** Resolve true if a server on `port` answers an inline PING with +PONG (after AUTH `password` when given). */
function ping(port, password) {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    let reply = ''
    const finish = (ok) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(1000, () => finish(false))
    socket.once('error', () => finish(false))
    socket.once('close', () => finish(false))
    // AUTH's reply (+OK or an error) is one line, as is PING's.
    const lines = password ? 2 : 1
    socket.on('data', (chunk) => {
      reply += chunk
      const parts = reply.split('\r\n')
      if (parts.length > lines) finish(parts[lines - 1].startsWith('+PONG'))
    })
    socket.write(`${password ? encodeCommand(['AUTH', password]) : ''}PING\r\n`)
  })
}

/**
 * Send one command on a fresh connection and resolve its parsed reply: simple or bulk string → string, nil → null,
 * integer → number, array → array (error elements as Error objects); an error reply rejects. `target` is a
 * `redis://[user:pass@]host:port[/db]` URL, or `{ url, timeout }` with the ms the reply may take (default 10000).
 */
async function redisCommand(target, ...args) {
  const { url, timeout = COMMAND_TIMEOUT_MS } = typeof target === 'string' ? { url: target } : target
  const parsed = new URL(url)
  if (parsed.protocol !== 'redis:') throw new TypeError(`redisCommand supports redis:// URLs only, got ${url}`)
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1'
  const port = Number(parsed.port || 6379)
  const commands = []
  if (parsed.password) {
    const user = decodeURIComponent(parsed.username)
    commands.push(['AUTH', ...(user ? [user] : []), decodeURIComponent(parsed.password)])
  }
  const db = parsed.pathname.slice(1)
  if (db) commands.push(['SELECT', db])
  commands.push(args)

  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port })
    const timer = setTimeout(() => {
      fail(new Error(`redis at ${host}:${port} did not reply to ${args[0]} within ${timeout} ms`))
    }, timeout)
    let buffer = Buffer.alloc(0)
    const replies = []
    function fail(err) {
      clearTimeout(timer)
      socket.destroy()
      reject(err)
    }
    socket.once('error', fail)
    socket.once('close', () => fail(new Error(`redis at ${host}:${port} closed the connection before replying`)))
    socket.on('data', (chunk) => {
      buffer = Buffer.concat([buffer, chunk])
      try {
        let reply
        while (replies.length < commands.length && (reply = parseReply(buffer, 0))) {
          replies.push(reply.value)
          buffer = buffer.subarray(reply.next)
        }
      } catch (err) {
        return fail(err)
      }
      if (replies.length < commands.length) return
      const error = replies.find((reply) => reply instanceof Error)
      if (error) return fail(error)
      clearTimeout(timer)
      socket.removeAllListeners('close')
      socket.end()
      resolve(replies[replies.length - 1])
    })
    socket.write(commands.map(encodeCommand).join(''))
  })
}

/** Encode one command as a RESP array of bulk strings. */
function encodeCommand(args) {
  const parts = args.map((arg) => {
    const text = String(arg)
    return `$${Buffer.byteLength(text)}\r\n${text}\r\n`
  })
  return `*${args.length}\r\n${parts.join('')}`
}

/** Parse one RESP2 reply at `start`: `{ value, next }`, or null while incomplete. Error replies become Errors. */
function parseReply(buffer, start) {
  const eol = buffer.indexOf('\r\n', start)
  if (eol === -1) return null
  const type = String.fromCharCode(buffer[start])
  const line = buffer.toString('utf8', start + 1, eol)
  const next = eol + 2
  switch (type) {
    case '+':
      return { value: line, next }
    case '-':
      return { value: new Error(line), next }
    case ':':
      return { value: Number(line), next }
    case '$': {
      const length = Number(line)
      if (length < 0) return { value: null, next }
      if (buffer.length < next + length + 2) return null
      return { value: buffer.toString('utf8', next, next + length), next: next + length + 2 }
    }
    case '*': {
      const count = Number(line)
      if (count < 0) return { value: null, next }
      const items = []
      let position = next
      for (let i = 0; i < count; i++) {
        const item = parseReply(buffer, position)
        if (!item) return null
        items.push(item.value)
        position = item.next
      }
      return { value: items, next: position }
    }
    default:
      throw new Error(`unexpected RESP reply type ${JSON.stringify(type)}`)
  }
}

/**
 * The Redis of a test run, the demo or the benchmark: REDIS_URL when set, else a throwaway redis-server (with a
 * clear message when redis-server is missing). Resolves `{ url, server, stop() }`; `server` is the started handle,
 * or null for REDIS_URL, which `stop()` leaves alone.
 */
async function redisFromEnv() {
  if (process.env.REDIS_URL) return { url: process.env.REDIS_URL, server: null, stop: async () => {} }
  requireRedisServer()
  const server = await startRedis()
  return { url: server.url, server, stop: () => server.stop() }
}

/**
 * How many times the server at `target` (as for redisCommand) has run `command` (lower case, say `publish`), or every
 * command when none is given; commands run by scripts count too (INFO commandstats).
 */
async function commandCalls(target, command) {
  const stats = await redisCommand(target, 'INFO', 'commandstats')
  if (command) return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
  return [...stats.matchAll(/calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0)
}

/**
 * The compare-and-delete of its own the server at `target` offers, as `INFO commandstats` names it: `delifeq` on Valkey
 * 9.0 and newer, `delex` on Redis 8.4 and newer (each with SET's IFEQ), or null. Valkey answers a `redis_version` of
 * 7.2 too.
 */
async function compareAndDeleteOf(target) {
  const info = await redisCommand(target, 'INFO', 'server')
  const version = (field) => new RegExp(`${field}:(\\d+)\\.(\\d+)`).exec(info)?.slice(1).map(Number)
  const [valkey, redis] = [version('valkey_version'), version('redis_version')]
  if (valkey) return valkey[0] >= 9 ? 'delifeq' : null
  return redis && (redis[0] > 8 || (redis[0] === 8 && redis[1] >= 4)) ? 'delex' : null
}

module.exports = {
  startRedis,
  compareAndDeleteOf,
  requireRedisServer,
  requireDeploymentTools,
  redisCommand,
  commandCalls,
  redisFromEnv,
  freePort,
  onPath,
  watchParent,
}
