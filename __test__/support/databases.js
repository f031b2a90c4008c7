'use strict'
// Throwaway Postgres and MariaDB servers for the tests, the chaos suite and the benchmark of redis-snatch/fence: each
// from the system's packages, on a free loopback port, with a data directory of its own that is removed when it stops.
// As root, each runs as its package's user (Postgres refuses to run as root): `postgres`, `mysql`.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { freePort, onPath, watchParent } = require('./redis-server')

const READY_TIMEOUT_MS = 60_000
const STOP_TIMEOUT_MS = 15_000
const POLL_INTERVAL_MS = 50
const BIND_ATTEMPTS = 3
const OUTPUT_LIMIT = 16_384

const INSTALL = 'sudo apt-get install postgresql mariadb-server (Debian/Ubuntu; `.ci/run` installs them)'

// Every running server and its directory, so none outlives this process.
const running = new Set()
process.on('exit', () => {
  for (const { child, dir } of running) {
    child.kill('SIGKILL')
    fs.rmSync(dir, { recursive: true, force: true })
  }
})

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The first of `candidates` (absolute paths, or names looked up on PATH) that is an executable. */
function findExecutable(candidates) {
  for (const candidate of candidates) {
    if (!path.isAbsolute(candidate)) {
      if (onPath(candidate)) return candidate
      continue
    }
    try {
      fs.accessSync(candidate, fs.constants.X_OK)
      return candidate
    } catch {}
  }
  return null
}

/** Postgres' `initdb` and `postgres`: Debian keeps them in /usr/lib/postgresql/<version>/bin (the newest is used). */
function postgresBinaries() {
  const root = '/usr/lib/postgresql'
  const versions = fs.existsSync(root) ? fs.readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => b - a) : []
  const find = (name) => findExecutable([...versions.map((v) => path.join(root, v, 'bin', name)), name])
  const [initdb, postgres] = [find('initdb'), find('postgres')]
  if (!initdb || !postgres) {
    throw new Error(`Postgres (initdb and postgres) is required for the tests of redis-snatch/fence; install it: ${INSTALL}`)
  }
  return { initdb, postgres }
}

/** MariaDB's `mariadb-install-db` and `mariadbd` (Debian keeps the server in /usr/sbin). */
function mariadbBinaries() {
  const install = findExecutable(['mariadb-install-db', '/usr/bin/mariadb-install-db'])
  const server = findExecutable(['mariadbd', '/usr/sbin/mariadbd'])
  if (!install || !server) {
    throw new Error(`MariaDB (mariadb-install-db and mariadbd) is required for the tests of redis-snatch/fence; install it: ${INSTALL}`)
  }
  return { install, server }
}

/** Throws an Error saying how to install Postgres and MariaDB unless both are there. */
function requireDatabases() {
  postgresBinaries()
  mariadbBinaries()
}

/** The uid and gid of system user `name` (as root), or undefined when not root. */
function runAs(name) {
  if (process.getuid?.() !== 0) return undefined
  const id = (flag) => spawnSync('id', [flag, name], { encoding: 'utf8' })
  const [uid, gid] = [id('-u'), id('-g')]
  if (uid.status !== 0 || gid.status !== 0) {
    throw new Error(`the system user '${name}' is missing (its package creates it): ${INSTALL}`)
  }
  return { uid: Number(uid.stdout), gid: Number(gid.stdout) }
}

/** A new temp directory, owned by `user` when given. */
function tempDir(prefix, user) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix))
  if (user) fs.chownSync(dir, user.uid, user.gid)
  return dir
}

/** Runs `command` (as `user`) to completion; throws with its output if it fails. */
function runSync(command, args, user, cwd) {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', ...user, timeout: READY_TIMEOUT_MS })
  if (result.status !== 0) {
    throw new Error(`${path.basename(command)} failed (${result.error?.message ?? result.status ?? result.signal}):\n${result.stdout}${result.stderr}`)
  }
}

/**
 * Starts `command args(port)` (as `user`) on a free port and resolves once `ready(port)` resolves true; a handle with
 * `stop()` (`signal`, then SIGKILL after a while), `pause()`, `resume()`. `dir` is removed once it exited. Another
 * attempt on another port when the port was taken meanwhile (`taken(output)`).
 */
async function serve(name, dir, user, command, args, ready, taken, stopSignal) {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort()
    const child = spawn(command, args(port), { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], ...user })
    const entry = { child, dir }
    running.add(entry)
    let output = ''
    const collect = (chunk) => {
      output = (output + chunk).slice(-OUTPUT_LIMIT)
    }
    child.stdout.setEncoding('utf8').on('data', collect)
    child.stderr.setEncoding('utf8').on('data', collect)
    const guard = watchParent(child.pid, dir)
    let exited = false
    const done = new Promise((resolve) => child.once('close', resolve)).then(() => {
      exited = true
      guard.kill('SIGKILL')
    })
    for (const handle of [child, child.stdout, child.stderr]) handle.unref()
    const deadline = Date.now() + READY_TIMEOUT_MS
    while (!exited && Date.now() < deadline && !(await ready(port))) await sleep(POLL_INTERVAL_MS)
    if (!exited && Date.now() < deadline) {
      return {
        port,
        process: child,
        pause: () => child.kill('SIGSTOP'),
        resume: () => child.kill('SIGCONT'),
        async stop() {
          if (!exited) {
            child.kill('SIGCONT')
            child.kill(stopSignal)
            const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS)
            await done
            clearTimeout(timer)
          }
          running.delete(entry)
          fs.rmSync(dir, { recursive: true, force: true })
        },
      }
    }
    child.kill('SIGKILL')
    await done
    running.delete(entry)
    if (!(taken(output) && attempt < BIND_ATTEMPTS)) {
      fs.rmSync(dir, { recursive: true, force: true })
      throw new Error(`${name} on port ${port} ${exited ? 'exited during startup' : 'did not answer in time'}; its output:\n${output}`)
    }
  }
}

/** Resolves whether `connect()` gives a connection (closed at once). */
async function answers(connect) {
  try {
    await (await connect()).end()
    return true
  } catch {
    return false
  }
}

/**
 * A throwaway Postgres (initdb into a temp dir, then `postgres` on 127.0.0.1:<free port>, its socket in that dir, no
 * fsync unless `options.durable`), `options.settings` as `-c name=value`. Resolves `{ port, config, url, stop(), … }`:
 * `config` is node-postgres' connection config (user postgres, database postgres, trust authentication).
 */
async function startPostgres(options = {}) {
  const { initdb, postgres } = postgresBinaries()
  const user = runAs('postgres')
  const dir = tempDir('redis-snatch-pg-', user)
  const data = path.join(dir, 'data')
  try {
    runSync(initdb, ['-D', data, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'], user, dir)
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const settings = { listen_addresses: '127.0.0.1', ...(options.durable ? {} : { fsync: 'off' }), ...options.settings }
  const args = (port) => ['-D', data, '-p', String(port), '-k', dir, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])]
  const { Client } = require('pg')
  const config = (port) => ({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' })
  const ready = (port) => answers(async () => {
    const client = new Client(config(port))
    client.on('error', () => {})
    await client.connect()
    return client
  })
  const taken = (output) => /could not bind|address already in use/i.test(output)
  const server = await serve('postgres', dir, user, postgres, args, ready, taken, 'SIGINT')
  return { ...server, config: config(server.port), url: `postgres://postgres@127.0.0.1:${server.port}/postgres` }
}

/**
 * A throwaway MariaDB (mariadb-install-db into a temp dir, then `mariadbd --no-defaults` on 127.0.0.1:<free port>, its
 * socket in that dir, no binary log; commits not flushed to disk unless `options.durable`), `options.settings` as
 * `--name=value`. Resolves `{ port, config, stop(), … }`: `config` is mysql2's connection config, for the user
 * `snatch` (every privilege) and its database `snatch`.
 */
async function startMariadb(options = {}) {
  const { install, server: mariadbd } = mariadbBinaries()
  const user = runAs('mysql')
  const dir = tempDir('redis-snatch-mariadb-', user)
  const data = path.join(dir, 'data')
  const socket = path.join(dir, 'mariadb.sock')
  const as = user ? ['--user=mysql'] : []
  try {
    const args = ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--skip-test-db', ...as]
    runSync(install, args, undefined, dir)
  } catch (err) {
    fs.rmSync(dir, { recursive: true, force: true })
    throw err
  }
  const settings = {
    'innodb-buffer-pool-size': '64M',
    ...(options.durable ? {} : { 'innodb-flush-log-at-trx-commit': '2', 'innodb-doublewrite': '0' }),
    ...options.settings,
  }
  const args = (port) => [
    '--no-defaults', `--datadir=${data}`, `--socket=${socket}`, `--port=${port}`, '--bind-address=127.0.0.1',
    `--pid-file=${path.join(dir, 'mariadb.pid')}`, '--skip-name-resolve', '--skip-log-bin', ...as,
    ...Object.entries(settings).map(([k, v]) => `--${k}=${v}`),
  ]
  const mysql = require('mysql2/promise')
  // Only this very server listens on its own socket; the port is checked once the user exists.
  const ready = () => answers(() => mysql.createConnection({ socketPath: socket, user: 'root' }))
  const taken = (output) => /Can't start server: Bind on TCP\/IP port|address already in use/i.test(output)
  const server = await serve('mariadbd', dir, undefined, mariadbd, args, ready, taken, 'SIGTERM')
  const root = await mysql.createConnection({ socketPath: socket, user: 'root' })
  try {
    await root.query("CREATE USER 'snatch'@'%'")
    await root.query("GRANT ALL ON *.* TO 'snatch'@'%'")
    await root.query('CREATE DATABASE snatch')
  } finally {
    await root.end()
  }
  const config = { host: '127.0.0.1', port: server.port, user: 'snatch', database: 'snatch' }
  await (await mysql.createConnection(config)).end()
  return { ...server, config }
}

module.exports = { startPostgres, startMariadb, requireDatabases }
