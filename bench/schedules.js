'use strict'
// What schedules cost Redis and the replicas (`npm run bench:schedules [-- --package DIR]`):
//   occurrence: one schedule every second on one replica for 20 s: Redis commands (INFO commandstats, calls made by
//               scripts included) and Redis CPU (INFO's used_cpu_user + used_cpu_sys, net of the idle server's over
//               as long) per occurrence;
//   idle:       1,000 schedules that do not fire registered by each of 3 replica processes, measured for 30 s after
//               10 s of warm-up: each replica's CPU and Redis ops/s and CPU.
// Runs against a throwaway redis-server per part. `--package DIR` measures another checkout of redis-snatch (say, the
// last release) with the same script. Prints a Markdown table; with `--out FILE`, writes it there too.

const { fork } = require('node:child_process')
const path = require('node:path')
const { startRedis, redisCommand, commandCalls } = require('../__test__/support/redis-server')
const { option, publish } = require('./lib/cli')

const args = process.argv.slice(2)
const pkg = path.resolve(option('--package', path.join(__dirname, '..')))
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Redis's counters now: commands called (in scripts too), CPU seconds. */
async function counters(url) {
  const calls = await commandCalls(url)
  const cpu = await redisCommand(url, 'INFO', 'cpu')
  const seconds = ['used_cpu_user', 'used_cpu_sys'].reduce((n, f) => n + Number(new RegExp(`${f}:([\\d.]+)`).exec(cpu)[1]), 0)
  return { calls, cpu: seconds }
}

/**
 * One schedule every second for `seconds` on one replica: commands and Redis CPU (µs) per occurrence, the CPU net of
 * what the idle server takes in as long (measured first).
 */
async function perOccurrence(seconds = 20) {
  const server = await startRedis()
  const quiet = await counters(server.url)
  await sleep(seconds * 1000)
  const idleCpu = (await counters(server.url)).cpu - quiet.cpu
  const { createLocker } = require(pkg)
  const locker = createLocker({ url: server.url })
  let runs = 0
  const task = locker.schedule('bench:occurrence', '* * * * * *', () => {})
  task.on('run', () => runs++)
  await new Promise((resolve) => task.once('run', resolve))
  const before = await counters(server.url)
  const counted = runs
  await sleep(seconds * 1000)
  const after = await counters(server.url)
  const occurrences = runs - counted
  await task.stop()
  await locker.close()
  await server.stop()
  // The two INFO calls of the measurement are not the schedule's.
  const calls = after.calls - before.calls - 2
  return { occurrences, commands: calls / occurrences, cpuUs: ((after.cpu - before.cpu - idleCpu) * 1e6) / occurrences }
}

/** `count` idle schedules on each of `replicas` processes: their CPU and Redis's ops/s and CPU over `seconds`. */
async function idle(count = 1000, replicas = 3, seconds = 30) {
  const server = await startRedis()
  const children = Array.from({ length: replicas }, () =>
    fork(__filename, ['--replica', server.url, String(count), pkg], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  )
  await Promise.all(children.map((child) => new Promise((resolve) => child.once('message', resolve))))
  await sleep(10_000)
  const cpuOf = (child) => new Promise((resolve) => (child.once('message', resolve), child.send('cpu')))
  const startCpu = await Promise.all(children.map(cpuOf))
  const before = await counters(server.url)
  const t0 = Date.now()
  await sleep(seconds * 1000)
  const after = await counters(server.url)
  const elapsed = (Date.now() - t0) / 1000
  const endCpu = await Promise.all(children.map(cpuOf))
  for (const child of children) child.send('stop')
  await Promise.all(children.map((child) => new Promise((resolve) => child.once('exit', resolve))))
  await server.stop()
  const replicaCpu = endCpu.map((end, i) => (end - startCpu[i]) / 1e6 / elapsed)
  return {
    replicaCpuPercent: (100 * replicaCpu.reduce((a, b) => a + b, 0)) / replicas,
    redisOpsPerSecond: (after.calls - before.calls - 2) / elapsed,
    redisCpuPercent: (100 * (after.cpu - before.cpu)) / elapsed,
  }
}

/** A replica process of `idle`: `count` schedules that fire once a year. */
async function replica(url, count, from) {
  const { createLocker } = require(from)
  const locker = createLocker({ url })
  for (let n = 0; n < count; n++) locker.schedule(`bench:idle:${process.pid}:${n}`, '0 0 0 1 1 *', () => {})
  process.send('ready')
  process.on('message', async (message) => {
    if (message === 'cpu') {
      const { user, system } = process.cpuUsage()
      process.send(user + system)
    } else {
      await locker.close()
      process.exit(0)
    }
  })
}

async function main() {
  if (args[0] === '--replica') return replica(args[1], Number(args[2]), args[3])
  const occurrence = await perOccurrence()
  const fleet = await idle()
  const version = require(path.join(pkg, 'package.json')).version
  const table = [
    `redis-snatch ${version} at ${pkg}, Node ${process.version}, ${new Date().toISOString().slice(0, 19)}Z`,
    '',
    '| figure | value |',
    '|---|---:|',
    `| Redis commands per occurrence (one schedule, every second, ${occurrence.occurrences} occurrences) | ${occurrence.commands.toFixed(1)} |`,
    `| Redis CPU per occurrence (net of the idle server's) | ${occurrence.cpuUs.toFixed(0)} µs |`,
    `| 1,000 idle schedules × 3 replicas: CPU per replica | ${fleet.replicaCpuPercent.toFixed(2)} % of a core |`,
    `| … Redis commands per second | ${fleet.redisOpsPerSecond.toFixed(0)} |`,
    `| … Redis CPU | ${fleet.redisCpuPercent.toFixed(2)} % of a core |`,
  ].join('\n')
  publish(table)
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
