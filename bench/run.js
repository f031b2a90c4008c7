'use strict'
// `npm run bench`: redis-snatch against other Redis lock libraries and a raw ioredis floor, each library and
// scenario in a fresh process, interleaved and repeated; plus the redis-benchmark floor. The cluster and TLS
// scenarios run on deployments of the test harness, started only when selected. Writes results/<date>.md and
// prints it; a full run (no --scenarios, --libs or --soak) then runs bench/shared.js into results/<date>-shared.md. `npm run bench -- --help` lists the options.

const { fork, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { LIBS } = require('./libs')
const { hasRedisBenchmark, measureFloor } = require('./lib/floor')
const { renderReport, renderSoak } = require('./lib/report')
const { SCENARIOS } = require('./lib/scenarios')
const { serverBinary } = require('./lib/servers')
const { ensureBuilt } = require('../scripts/ensure-built')

const root = path.join(__dirname, '..')
const { redisCommand, redisFromEnv } = require(path.join(root, '__test__/support/redis-server'))
const harness = path.join(root, '__test__/support/deployments')

// Redis's default cluster-node-timeout rather than the tests' 1 s: on a busy machine no node is marked failing
// (which, without replicas, would take the cluster down) in the middle of a run.
const CLUSTER_NODE_TIMEOUT_MS = 15_000

const USAGE = `usage: npm run bench -- [options]
  --seconds N        measured seconds per run (default 5)
  --warmup N         seconds of warmup before each measured window (default: a fifth of --seconds, at most 1;
                     0 measures every cycle from the first, startup included)
  --reps N           repetitions of each run (default 3)
  --quick            smoke run: 1 s per run, 1 repetition
  --soak N           only redis-snatch withfn at c=50 for N seconds, RSS sampled every second
  --libs a,b         only these libraries (${LIBS.map((l) => l.id).join(', ')}; a reference only when named)
  --scenarios a,b    only these scenarios (${Object.keys(SCENARIOS).join(', ')})
REDIS_URL=redis://… uses that server instead of starting a throwaway redis-server. The cluster scenarios start a
Redis Cluster of 3 masters with a replica each (cluster-valkey: of Valkey 9.1 servers, cluster-redis8: of Redis 8),
the valkey and redis8 scenarios a Valkey 9.1 and a Redis 8 server, and the tls scenarios a redis-server (tls-redis8:
Redis 8) with a TLS port (test certificates), all throwaway and only when selected; REDIS_URL does not apply to them.`

const children = new Set()
process.on('exit', () => {
  for (const child of children) child.kill('SIGKILL')
})
process.on('SIGINT', () => process.exit(130))
process.on('SIGTERM', () => process.exit(143))

/** The options from argv; exits with the usage on a bad one. */
function parseArgs(argv) {
  const options = { seconds: 5, warmup: null, reps: 3, quick: false, soak: 0, libs: null, scenarios: null }
  const fail = (message) => {
    console.error(`${message}\n${USAGE}`)
    process.exit(2)
  }
  const positive = (name, value) => {
    const n = Number(value)
    if (!(n > 0)) fail(`${name} needs a positive number, got ${value}`)
    return n
  }
  const nonNegative = (name, value) => {
    const n = Number(value)
    if (!(n >= 0)) fail(`${name} needs a number of at least 0, got ${value}`)
    return n
  }
  const list = (name, value, known) => {
    const items = String(value ?? '').split(',').filter(Boolean)
    const unknown = items.filter((item) => !known.includes(item))
    if (!items.length || unknown.length) fail(`${name}: unknown or missing ${unknown.join(', ') || 'value'}`)
    return items
  }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    if (arg === '--help' || arg === '-h') {
      console.log(USAGE)
      process.exit(0)
    } else if (arg === '--quick') options.quick = true
    else if (arg === '--seconds') options.seconds = positive(arg, argv[++i])
    else if (arg === '--warmup') options.warmup = nonNegative(arg, argv[++i])
    else if (arg === '--reps') options.reps = Math.round(positive(arg, argv[++i]))
    else if (arg === '--soak') options.soak = positive(arg, argv[++i])
    else if (arg === '--libs') options.libs = list(arg, argv[++i], LIBS.map((l) => l.id))
    else if (arg === '--scenarios') options.scenarios = list(arg, argv[++i], Object.keys(SCENARIOS))
    else fail(`unknown option ${arg}`)
  }
  if (options.quick) Object.assign(options, { seconds: 1, reps: 1 })
  return options
}

/** Install the peers into bench/node_modules (npm install) when one of them is missing. */
function ensurePeersInstalled() {
  const missing = LIBS.filter((lib) => lib.pkg && !fs.existsSync(path.join(__dirname, 'node_modules', lib.pkg)))
  if (missing.length === 0) return
  console.error(`installing the benchmark's peers in ${__dirname} (npm install)…`)
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  const result = spawnSync(npm, ['install', '--no-audit', '--no-fund'], { cwd: __dirname, stdio: 'inherit' })
  if (result.status !== 0) throw new Error(`npm install in ${__dirname} failed`)
}

/** Builds the package first if need be (a fresh clone), and fails early, with a hint, if it cannot be loaded. */
function requireBuiltPackage() {
  ensureBuilt()
  try {
    require(root)
  } catch (err) {
    throw new Error(`cannot load redis-snatch from ${root} (build it with \`npm run build\`): ${err.message}`)
  }
}

/** A Cluster of 3 masters with a replica each on the server `binary`, as a deployment (see DEPLOYMENTS). */
async function startBenchCluster(binary, name) {
  const { startCluster } = require(harness)
  const cluster = await startCluster({ masters: 3, replicas: 1, nodeTimeout: CLUSTER_NODE_TIMEOUT_MS, binary })
  const ports = cluster.nodes.map((node) => node.port).join(', ')
  return {
    options: { cluster: cluster.seeds },
    pids: cluster.nodes.map((node) => node.process.pid),
    description:
      `${name} of 3 masters with a replica each on ports ${ports} (the test harness's \`startCluster\`, ` +
      '`redis-cli --cluster create`), every node as a seed; redis CPU is the sum over the 6 processes',
    stop: () => cluster.stop(),
  }
}

/** Our own redis-server, or the one at REDIS_URL: its url, pid (when local) and version, and how to stop it. */
async function connectRedis() {
  const { url, server, stop } = await redisFromEnv()
  const info = await redisCommand(url, 'INFO', 'server')
  const field = (name) => new RegExp(`^${name}:(.*)\r?$`, 'm').exec(info)?.[1]
  let pid = server ? server.process.pid : Number(field('process_id'))
  // A REDIS_URL server's pid is ours to read only when it is a redis-server on this machine.
  if (!server && !readComm(pid).includes('redis')) pid = 0
  return { url, pid, version: field('redis_version'), own: !!server, stop }
}

function readComm(pid) {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, 'utf8')
  } catch {
    return ''
  }
}

/** The names of the scenarios this run selected, in their order. */
function selectedScenarios(options) {
  return Object.keys(SCENARIOS).filter((name) => !options.scenarios || options.scenarios.includes(name))
}

/**
 * The deployments that scenarios run on (a scenario's `deployment`), each started by the test harness. A start
 * resolves `{ options, plaintext?, pids, description, stop }`: `options` are createLocker's connection options,
 * which the adapters get as `deployment`; `plaintext` the same for the server's plaintext port; `pids` the
 * redis-server processes whose CPU the report shows.
 */
const DEPLOYMENTS = {
  /** A Redis Cluster as users run it: 3 masters with a replica each. */
  cluster: () => startBenchCluster('redis-server', 'Redis Cluster'),
  /** The same on Valkey 9.1 servers: the server's own DELIFEQ in use. */
  'cluster-valkey': () => {
    const binary = serverBinary('valkey')
    return startBenchCluster(binary, `Valkey 9.1 Cluster (${binary})`)
  },
  /** The same on Redis 8 servers: the server's own DELEX in use. */
  'cluster-redis8': () => {
    const binary = serverBinary('redis8')
    return startBenchCluster(binary, `Redis 8 Cluster (${binary})`)
  },
  /** One Valkey 9.1 server: the server's own DELIFEQ in use. */
  valkey: () => startBenchServer(serverBinary('valkey'), 'Valkey 9.1'),
  /** One Redis 8 server: the server's own DELEX in use. */
  redis8: () => startBenchServer(serverBinary('redis8'), 'Redis 8'),
  /** One redis-server listening on a TLS port (test certificates made by openssl) and a plaintext one. */
  tls: () => startBenchTls('redis-server', 'redis-server'),
  /** The same on a Redis 8 server: the server's own DELEX in use. */
  'tls-redis8': () => {
    const binary = serverBinary('redis8')
    return startBenchTls(binary, `Redis 8 server (${binary})`)
  },
}

/** One server of `binary`, plaintext. */
async function startBenchServer(binary, name) {
  const { startRedis } = require(path.join(root, '__test__/support/redis-server'))
  const server = await startRedis({ binary })
  return {
    options: { url: server.url },
    pids: [server.process.pid],
    description: `one ${name} server on port ${server.port} (${binary})`,
    stop: () => server.stop(),
  }
}

/** One server of `binary` listening on a TLS port (test certificates made by openssl) and a plaintext one. */
async function startBenchTls(binary, name) {
  const { makeCertificates, startTlsRedis } = require(harness)
  const certs = await makeCertificates()
  const server = await startTlsRedis({ certs, binary })
  return {
    options: { url: server.tlsUrl, tls: { ca: certs.ca } },
    plaintext: { url: server.url },
    pids: [server.process.pid],
    description:
      `one ${name} with TLS on port ${server.tlsPort} and plaintext on port ${server.port} (the test ` +
      "harness's `startTlsRedis`: EC P-256 certificates of a test CA, trusted through `tls: { ca }`, no client " +
      'certificates)',
    stop: () => server.stop(),
  }
}

/** Start the deployments that `scenarios` need (none twice); on a failure stop those already started. */
async function startDeployments(scenarios) {
  const names = [...new Set(scenarios.map((name) => SCENARIOS[name].deployment).filter(Boolean))]
  const started = {}
  try {
    for (const name of names) {
      console.error(`starting the ${name} deployment…`)
      started[name] = await DEPLOYMENTS[name]()
    }
  } catch (err) {
    await stopDeployments(started)
    throw new Error(`cannot start the ${names.find((name) => !started[name])} deployment: ${err.message}`)
  }
  return started
}

/** Stop the started deployments, reporting (not throwing) a failure to stop one. */
async function stopDeployments(deployments) {
  for (const [name, deployment] of Object.entries(deployments)) {
    try {
      await deployment.stop()
    } catch (err) {
      console.error(`stopping the ${name} deployment failed: ${err.message}`)
    }
  }
}

/** Fork a worker for one job; resolve its result, or `{ error }` if it failed or hung. */
function runWorker(job) {
  return new Promise((resolve) => {
    const child = fork(path.join(__dirname, 'worker.js'), [JSON.stringify(job)], { stdio: 'inherit' })
    children.add(child)
    let reply = null
    const limit = job.warmupMs + job.durationMs + 60_000
    const timer = setTimeout(() => {
      reply ??= { error: `the worker did not finish within ${limit} ms` }
      child.kill('SIGKILL')
    }, limit)
    child.on('message', (message) => {
      reply ??= message
    })
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      children.delete(child)
      resolve(reply?.result ?? { error: reply?.error ?? `the worker exited (${signal || code}) without a result` })
    })
  })
}

/** The lines at the top of a report: date, machine, versions, method, the deployments in use. */
function headerLines(options, redis, title, deployments = {}) {
  const version = (pkg) => {
    try {
      return JSON.parse(fs.readFileSync(path.join(__dirname, 'node_modules', pkg, 'package.json'), 'utf8')).version
    } catch {
      return '?'
    }
  }
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout?.trim()
  // Uncommitted changes outside bench/ (other work in progress) may be part of the module under test.
  const dirty = spawnSync('git', ['diff', '--quiet', 'HEAD', '--', '.', ':(exclude)bench'], { cwd: root }).status === 1
  const own = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).version
  const cpus = os.cpus()
  const lines = [`# ${title}, ${new Date().toISOString().slice(0, 10)}`, '']
  if (options.quick) {
    lines.push(
      '**Quick run (`--quick`): 1 s per run after a 0.2 s warmup, 1 repetition. A smoke test of the benchmark; ' +
        'the numbers are noisy and not for comparison.**',
      '',
    )
  }
  const load = os.loadavg().map((n) => n.toFixed(2)).join(' ')
  lines.push(
    `- Machine: ${os.availableParallelism()} CPUs (${cpus[0]?.model.trim() || 'unknown'}), ` +
      `${os.type()} ${os.release()}, load average ${load} at start`,
    `- Node ${process.version}; redis-server ${redis.version} (${redis.own ? 'own throwaway server' : 'REDIS_URL'})`,
    `- redis-snatch ${own} (the built module in the package root, HEAD ${git || '?'}` +
      `${dirty ? ' with uncommitted changes' : ''}); ` +
      LIBS.filter((l) => l.pkg).map((l) => `${l.pkg} ${version(l.pkg)}`).join(', '),
  )
  for (const [name, deployment] of Object.entries(deployments)) {
    lines.push(`- ${name} scenario: ${deployment.description}`)
  }
  if (!options.soak) {
    lines.push(
      `- ${options.seconds} s measured per run after ${warmupMs(options) / 1000} s warmup, ` +
        `${options.reps} repetition(s) with the libraries interleaved, medians shown; each run in a fresh process. ` +
        'Latency is per cycle; CPU is the share of one core over the measured window; max RSS is the peak of ' +
        'the worker process.',
    )
  }
  if (options.libs || options.scenarios) {
    lines.push(`- Partial run: ${[options.libs, options.scenarios].filter(Boolean).flat().join(', ')}`)
  }
  return lines
}

const warmupMs = (options) => (options.warmup ?? Math.min(1, options.seconds / 5)) * 1000

/** Write `text` to results/<date><suffix>.md and print it. */
function publish(text, suffix) {
  const dir = path.join(__dirname, 'results')
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, `${new Date().toISOString().slice(0, 10)}${suffix}.md`)
  fs.writeFileSync(file, text)
  console.log(text)
  console.error(`written to ${path.relative(process.cwd(), file)}`)
}

/** The comparison: the floor, then every selected library × scenario × concurrency × repetition; publish the report. */
async function compare(options, redis, deployments) {
  const selected = (lib) => options.libs.includes(lib.id) || (lib.with && options.libs.includes(lib.with))
  const libs = LIBS.filter((lib) => (options.libs ? selected(lib) : !lib.reference))
  const scenarios = selectedScenarios(options)
  const header = headerLines(options, redis, 'redis-snatch benchmark', deployments)

  let floor = null
  if (scenarios.every((name) => SCENARIOS[name].deployment)) {
    header.push('- no floor: only scenarios on deployments were selected (the floor is of the single server)')
  } else if (!hasRedisBenchmark()) {
    header.push('- redis-benchmark not found: no floor (install redis-tools)')
  } else {
    console.error('floor: redis-benchmark…')
    const { RELEASE_SCRIPT } = require('./libs/ioredis-raw')
    try {
      const sha = await redisCommand(redis.url, 'SCRIPT', 'LOAD', RELEASE_SCRIPT)
      floor = measureFloor({ url: redis.url, sha, redisPid: redis.pid, seconds: options.seconds, reps: options.reps })
    } catch (err) {
      header.push(`- no floor: ${err.message.split('\n')[0]}`)
    }
  }

  const plan = []
  for (const scenario of scenarios) {
    const { concurrencies, needs, deployment } = SCENARIOS[scenario]
    for (const concurrency of concurrencies) {
      for (let rep = 0; rep < options.reps; rep++) {
        for (const lib of libs) {
          if (needs && (needs === 'acquireWait' ? lib.wait === false : lib.module !== './redis-snatch')) continue
          if (deployment && !lib.deployments) continue
          if (lib.scenarios && !lib.scenarios.includes(scenario)) continue
          plan.push({ scenario, concurrency, rep, lib })
        }
      }
    }
  }
  const tag = Date.now().toString(36)
  const results = {}
  for (const [index, { scenario, concurrency, rep, lib }] of plan.entries()) {
    const target = deployments[SCENARIOS[scenario].deployment]
    const result = await runWorker({
      lib: lib.id,
      scenario,
      concurrency,
      url: redis.url,
      deployment: target && (lib.plaintext ? target.plaintext : target.options),
      redisPid: target ? target.pids : redis.pid,
      prefix: `bench:${tag}:${lib.id}:${scenario}:${concurrency}:${rep}:`,
      warmupMs: warmupMs(options),
      durationMs: options.seconds * 1000,
    })
    results[scenario] ??= {}
    results[scenario][concurrency] ??= {}
    ;(results[scenario][concurrency][lib.id] ??= []).push(result)
    const outcome = result.error ? `error: ${result.error.split('\n')[0]}` : `${Math.round(result.perSecond)}/s`
    const step = `[${index + 1}/${plan.length}] ${scenario} c=${concurrency} rep ${rep + 1}/${options.reps}`
    console.error(`${step} ${lib.name}: ${outcome}`)
  }
  publish(renderReport({ header, floor, results }), options.libs || options.scenarios ? '-partial' : '')
}

async function soak(options, redis) {
  console.error(`soak: redis-snatch withfn c=50 for ${options.soak} s…`)
  const result = await runWorker({
    lib: 'snatch',
    scenario: 'withfn',
    concurrency: 50,
    url: redis.url,
    redisPid: redis.pid,
    prefix: `bench:${Date.now().toString(36)}:soak:`,
    warmupMs: 0,
    durationMs: options.soak * 1000,
    soak: true,
  })
  if (result.error) throw new Error(`the soak run failed: ${result.error}`)
  const header = headerLines(options, redis, 'redis-snatch soak')
  publish(renderSoak({ header, seconds: options.soak, result }), '-soak')
}

/** The shared-results rounds (bench/shared.js: shared() against every caller running fn and a polling version). */
function sharedRounds(options) {
  const out = path.join(__dirname, 'results', `${new Date().toISOString().slice(0, 10)}-shared.md`)
  const run = spawnSync(process.execPath, [path.join(__dirname, 'shared.js'), '--seconds', String(options.seconds), '--out', out], {
    stdio: 'inherit',
  })
  if (run.status !== 0) throw new Error('bench/shared.js failed')
}

async function main() {
  const options = parseArgs(process.argv.slice(2))
  ensurePeersInstalled()
  requireBuiltPackage()
  const redis = await connectRedis()
  let deployments = {}
  try {
    if (!options.soak) deployments = await startDeployments(selectedScenarios(options))
    await (options.soak ? soak(options, redis) : compare(options, redis, deployments))
    if (!options.soak && !options.scenarios && !options.libs) sharedRounds(options)
  } finally {
    await stopDeployments(deployments)
    await redis.stop()
  }
}

main().catch((err) => {
  console.error(err.message)
  process.exitCode = 1
})
