'use strict'
// The dashboard's own cost (`npm run bench:dashboard [-- --seconds N] [--out FILE]`): against a throwaway
// redis-server with 100 schedules (registered by one replica, hourly: none runs during the measure) and 1,000 locks
// held, the Redis commands per second with no dashboard, then with 1 and with 5 pages open (each polls the state
// every second and shows one schedule's runs, as the page does), and the handler's memory (heap and RSS growth of the
// serving process after the polls). Prints a Markdown table.

const http = require('node:http')
const { createLocker } = require('..')
const { createDashboard } = require('../lib/dashboard')
const { startRedis, commandCalls, redisCommand } = require('../__test__/support/redis-server')

const { option, publish } = require('./lib/cli')
const seconds = Number(option('--seconds', 10))
const SCHEDULES = 100
const LOCKS = 1000

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The CPU seconds (user + sys) the server at `url` has used. */
async function cpu(url) {
  const info = await redisCommand(url, 'INFO', 'cpu')
  const field = (name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(info)[1])
  return field('used_cpu_user') + field('used_cpu_sys')
}

/**
 * Redis's commands per second (scripts' own commands counted) and CPU (% of a core) over `seconds` while `pages`
 * pages poll `base` (the page's requests, every second).
 */
async function measure(url, base, pages) {
  let stop = false
  const poll = async () => {
    while (!stop) {
      await Promise.all([fetch(`${base}api/state`).then((r) => r.text()), fetch(`${base}api/history?name=job:0`).then((r) => r.text())])
      await sleep(1000)
    }
  }
  const polling = Array.from({ length: pages }, poll)
  await sleep(1500)
  const [before, cpuBefore] = [await commandCalls(url), await cpu(url)]
  const started = Date.now()
  await sleep(seconds * 1000)
  const [after, cpuAfter] = [await commandCalls(url), await cpu(url)]
  const elapsed = (Date.now() - started) / 1000
  stop = true
  await Promise.all(polling)
  // The two INFO calls of the measure are not the dashboard's.
  return { commands: (after - before - 2) / elapsed, cpu: ((cpuAfter - cpuBefore) / elapsed) * 100 }
}

async function main() {
  const server = await startRedis()
  const replica = createLocker({ url: server.url })
  const tasks = Array.from({ length: SCHEDULES }, (_, i) => replica.schedule(`job:${i}`, `${i % 60} * * * *`, () => {}))
  const holder = createLocker({ url: server.url })
  const held = await Promise.all(Array.from({ length: LOCKS }, (_, i) => holder.tryLock(`held:${i}`, { ttl: 600_000 })))
  const viewer = createLocker({ url: server.url })
  await sleep(6000) // every schedule registered (a beat every 5 s)

  const idle = await measure(server.url, null, 0)
  const heapBefore = process.memoryUsage()
  const listener = http.createServer(createDashboard(viewer))
  await new Promise((resolve) => listener.listen(0, '127.0.0.1', resolve))
  const base = `http://127.0.0.1:${listener.address().port}/`
  const state = JSON.parse(await (await fetch(`${base}api/state`)).text())
  if (state.schedules.length !== SCHEDULES || state.locks.length !== LOCKS) {
    throw new Error(`the dashboard shows ${state.schedules.length} schedules and ${state.locks.length} locks`)
  }
  const stateBytes = JSON.stringify(state).length
  const one = await measure(server.url, base, 1)
  const five = await measure(server.url, base, 5)
  global.gc?.()
  const heapAfter = process.memoryUsage()
  let assets = 0
  for (const asset of ['', 'page.js', 'page.css']) assets += (await (await fetch(`${base}${asset}`)).arrayBuffer()).byteLength

  listener.close()
  await Promise.all(held.map((lock) => lock.release()))
  await Promise.all(tasks.map((task) => task.stop()))
  await Promise.all([replica.close(), holder.close(), viewer.close()])
  await server.stop()

  const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1)
  const report = [
    `The dashboard's own cost: ${SCHEDULES} schedules, ${LOCKS} locks held, ${seconds} s per case; Node ${process.version}.`,
    '',
    '| open pages | Redis commands/s | of which the dashboard | Redis CPU, % of a core |',
    '|---:|---:|---:|---:|',
    `| 0 (the replica's own beats) | ${idle.commands.toFixed(0)} | 0 | ${idle.cpu.toFixed(1)} |`,
    `| 1 | ${one.commands.toFixed(0)} | ${(one.commands - idle.commands).toFixed(0)} | ${one.cpu.toFixed(1)} |`,
    `| 5 | ${five.commands.toFixed(0)} | ${(five.commands - idle.commands).toFixed(0)} | ${five.cpu.toFixed(1)} |`,
    '',
    `One state answer: ${(stateBytes / 1024).toFixed(0)} KB of JSON. The page: ${(assets / 1024).toFixed(1)} KB (HTML, CSS and ` +
      `script, uncompressed). The handler's memory: the serving process's JS heap after the polls, ` +
      `${mb(heapAfter.heapUsed - heapBefore.heapUsed)} MB more than before the dashboard was made${global.gc ? ' (after a GC)' : ''}.`,
  ].join('\n')
  publish(report)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
