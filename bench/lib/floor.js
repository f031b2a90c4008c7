'use strict'
// The physical floor: redis-benchmark against the same server, for SET and for EVALSHA of the raw floor's release
// script (on a missing key), at -c 1, at -c 50, and at -c 50 with -P 16 (pipelining). Keys are under bench:floor.

const { spawnSync } = require('node:child_process')
const { performance } = require('node:perf_hooks')
const { cpuSeconds } = require('./proc')
const { median } = require('./stats')

const VARIANTS = [
  { clients: 1, pipeline: 1 },
  { clients: 50, pipeline: 1 },
  { clients: 50, pipeline: 16 },
]
const CALIBRATION_REQUESTS = 2000

/** Whether redis-benchmark is on PATH. */
function hasRedisBenchmark() {
  return !spawnSync('redis-benchmark', ['--version']).error
}

/**
 * Run every variant `reps` times for about `seconds` each; resolve one row per variant with the median SET and
 * EVALSHA rates (per second), their p50/p99 latency (ms) and the redis-server's CPU (cores) while they ran.
 */
function measureFloor({ url, sha, redisPid, seconds, reps }) {
  const connection = connectionArgs(url)
  const commands = { set: ['SET', 'bench:floor:set', 'value'], evalsha: ['EVALSHA', sha, '1', 'bench:floor', 'token'] }
  return VARIANTS.map(({ clients, pipeline }) => {
    const base = [...connection, '-c', String(clients), '-P', String(pipeline)]
    const run = (args) => {
      // A short calibration run sizes the real one to last about `seconds`.
      const rate = benchmark([...base, '-n', String(CALIBRATION_REQUESTS * pipeline), ...args]).rps
      return benchmark([...base, '-n', String(Math.max(1000, Math.round(rate * seconds))), ...args], redisPid)
    }
    const set = []
    const evalsha = []
    for (let rep = 0; rep < reps; rep++) {
      set.push(run(commands.set))
      evalsha.push(run(commands.evalsha))
    }
    const summary = (runs) => ({
      rps: median(runs.map((r) => r.rps)),
      p50: median(runs.map((r) => r.p50)),
      p99: median(runs.map((r) => r.p99)),
      redisCpu: median(runs.map((r) => r.redisCpu)),
    })
    return { clients, pipeline, set: summary(set), evalsha: summary(evalsha) }
  })
}

/** redis-benchmark's connection options for a redis:// URL. */
function connectionArgs(url) {
  const parsed = new URL(url)
  if (parsed.protocol !== 'redis:') throw new Error(`the floor needs a redis:// URL, got ${parsed.protocol}`)
  const args = ['-h', parsed.hostname.replace(/^\[(.*)\]$/, '$1') || '127.0.0.1', '-p', parsed.port || '6379']
  if (parsed.username) args.push('--user', decodeURIComponent(parsed.username))
  if (parsed.password) args.push('-a', decodeURIComponent(parsed.password), '--no-auth-warning')
  if (parsed.pathname.length > 1) args.push('--dbnum', parsed.pathname.slice(1))
  return args
}

/** One redis-benchmark run with --csv: its rate, p50 and p99, and the redis-server's CPU over it. */
function benchmark(args, redisPid) {
  const cpuBefore = cpuSeconds(redisPid)
  const start = performance.now()
  const out = spawnSync('redis-benchmark', ['--csv', ...args], { encoding: 'utf8' })
  const seconds = (performance.now() - start) / 1000
  if (out.error || out.status !== 0) {
    throw new Error(`redis-benchmark ${args.join(' ')} failed: ${out.error?.message || out.stderr}`)
  }
  const [header, row] = out.stdout.trim().split('\n').slice(-2).map(parseCsvLine)
  const column = (name) => Number(row[header.indexOf(name)])
  return {
    rps: column('rps'),
    p50: column('p50_latency_ms'),
    p99: column('p99_latency_ms'),
    redisCpu: (cpuSeconds(redisPid) - cpuBefore) / seconds,
  }
}

/** The fields of one line of redis-benchmark's CSV (every field quoted, no quotes inside). */
function parseCsvLine(line) {
  return line.split('","').map((field) => field.replace(/^"|"$/g, ''))
}

module.exports = { hasRedisBenchmark, measureFloor }
