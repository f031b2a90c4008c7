'use strict'
// `npm run bench:stored`: stored schedules (locker.upsertSchedule / locker.handle) at scale, side by side with
// BullMQ's job schedulers (queue.upsertJobScheduler) and workers on the same throwaway redis-server (issue 62, item 3):
//
//   memory: N schedules (default 100,000), each a 24-byte id, a daily cron in a time zone and 64 bytes of data (as
//           JSON): Redis used_memory growth over the N, per schedule. BullMQ: the same N job schedulers, counted
//           with the next delayed job each keeps; its events stream (history) is left out, and shown apart.
//   idle:   the fleet's idle cost: 3 runner processes (locker.handle; BullMQ: 3 Worker processes) with N schedules
//           none of which is due within the hour (and again with 1,000): Redis commands per second over `--seconds`
//           (default 60) after 10 s of warm-up, as client commands (INFO stats total_commands_processed) and as
//           calls including those made by scripts (INFO commandstats), with the commands that make them.
//   burst:  10,000 occurrences due in the same second (stored one-offs `at` one instant; BullMQ: 10,000 jobs delayed
//           to that instant), 3 runner / worker processes, a handler of 1 ms, at most 100 running at once per
//           process: runs per id (each exactly once), start lag p50/p99/max from the due time, runs per process,
//           occurrences per second.
//   cluster: the N stored schedules on a 6-node cluster (3 masters, 1 replica each; the test harness's
//           startCluster): keys, state hashes and due index entries per master, the largest key, and the commands
//           each master ran while they were upserted.
//
//   npm run bench:stored                          # the full run (about 12 minutes), writes results/<date>-stored.md
//   npm run bench:stored -- --count 10000 --seconds 20 --burst 2000   # a quick run, writes <date>-stored-quick.md
//   npm run bench:stored -- --parts memory,idle   # a subset (memory, idle, burst, cluster)
//   BENCH_PROFILE=1 npm run bench:stored -- --parts burst   # also prints, per occurrence of the burst, Redis calls and
//                                                           # µs by command, Redis CPU and the runner processes' CPU

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fork, spawnSync } = require('node:child_process')

const root = path.join(__dirname, '..')
const support = path.join(root, '__test__/support')
const { startRedis, redisCommand } = require(path.join(support, 'redis-server'))

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const ZONES = ['Europe/Paris', 'America/New_York', 'Asia/Tokyo', 'America/Los_Angeles', 'Australia/Sydney', 'Asia/Kolkata']
const UPSERT_CONCURRENCY = 200
const PER_PROCESS_RUNNING = 100
const REPLICAS = 3

function parseArgs(argv) {
  const options = { count: 100_000, seconds: 60, burst: 10_000, idleSmall: 1_000, parts: ['memory', 'idle', 'burst', 'cluster'] }
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]
    const value = argv[++i]
    if (arg === '--count') options.count = Number(value)
    else if (arg === '--seconds') options.seconds = Number(value)
    else if (arg === '--burst') options.burst = Number(value)
    else if (arg === '--parts') options.parts = value.split(',')
    else {
      console.error('usage: npm run bench:stored -- [--count N] [--seconds S] [--burst N] [--parts memory,idle,burst,cluster]')
      process.exit(2)
    }
  }
  return options
}

/** The i-th schedule: a 24-byte id, a zone, and a daily cron at least 11 hours away in that zone. */
function scheduleOf(i) {
  const id = `user:${String(i).padStart(19, '0')}`
  const timezone = ZONES[i % ZONES.length]
  const hour = Number(new Intl.DateTimeFormat('en-GB', { hour: '2-digit', hourCycle: 'h23', timeZone: timezone }).format(new Date()))
  const cron = `${i % 60} ${(hour + 12) % 24} * * *`
  const data = { user: i, pad: 'x'.repeat(64 - JSON.stringify({ user: i, pad: '' }).length) } // 64 bytes as JSON
  return { id, timezone, cron, data }
}

/** Runs `fn(i)` for i in [0, count), `concurrency` at a time; the seconds it took. */
async function forEach(count, concurrency, fn) {
  const started = Date.now()
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) await fn(next++)
    }),
  )
  return (Date.now() - started) / 1000
}

async function info(url, ...sections) {
  return redisCommand(url, 'INFO', ...sections)
}
const field = (text, name) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(text)?.[1] ?? NaN)

/** used_memory once the server has settled (no client of ours connected). */
async function usedMemory(url) {
  await sleep(200)
  return field(await info(url, 'memory'), 'used_memory')
}

/** Calls per command (INFO commandstats, script calls included) and client commands (total_commands_processed). */
async function commandCounters(url) {
  const text = await info(url, 'stats', 'commandstats')
  const calls = {}
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls[m[1]] = Number(m[2])
  return { processed: field(text, 'total_commands_processed'), calls }
}

/** Per occurrence: commands processed, calls and µs by command (INFO after CONFIG RESETSTAT); the Redis CPU used. */
function profile(text, cpuText, count) {
  const cpu = (t) => Number(/^used_cpu_sys:([\d.]+)/m.exec(t)[1]) + Number(/^used_cpu_user:([\d.]+)/m.exec(t)[1])
  const rows = [...text.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)]
    .map((m) => [m[1], Number(m[2]) / count, Number(m[3]) / count])
    .sort((a, b) => b[2] - a[2])
  const lines = rows.map(([name, calls, usec]) => `  ${name}: ${calls.toFixed(2)} calls, ${usec.toFixed(1)} µs per occurrence`)
  return [
    `profile: ${(field(text, 'total_commands_processed') / count).toFixed(2)} commands processed per occurrence (script calls included), Redis CPU ${(cpu(text) - cpu(cpuText)).toFixed(2)} s`,
    ...lines,
  ].join('\n')
}

function counterDelta(before, after) {
  const calls = {}
  for (const [name, n] of Object.entries(after.calls)) {
    const d = n - (before.calls[name] ?? 0)
    if (d > 0) calls[name] = d
  }
  calls.info = (calls.info ?? 0) - 1 // the measurement's own INFO
  if (calls.info <= 0) delete calls.info
  return { processed: after.processed - before.processed - 1, calls }
}

// ---------------------------------------------------------------------------------------------------------------
// Children: runner / worker processes.

async function child(kind, url, handler) {
  const runs = []
  let close
  const onRun = (id, due, start) => runs.push([id, start - due, start])
  if (kind === 'snatch') {
    const { createLocker } = require(root)
    const locker = createLocker(url.startsWith('[') ? { cluster: JSON.parse(url) } : { url })
    const h = locker.handle(
      handler,
      async (ctx) => {
        const start = Date.now()
        await sleep(1)
        onRun(ctx.id, ctx.tick.getTime(), start)
      },
      { maxRunning: PER_PROCESS_RUNNING },
    )
    h.on('error', (err) => console.error(`runner ${process.pid}: ${err.message}`))
    close = async () => {
      await h.stop()
      await locker.close()
    }
  } else {
    const { Worker } = require(path.join(__dirname, 'node_modules/bullmq'))
    const { hostname, port } = new URL(url)
    const worker = new Worker(
      handler,
      async (job) => {
        const start = Date.now()
        await sleep(1)
        onRun(job.id, job.data.due ?? start, start)
      },
      { connection: { host: hostname, port: Number(port), maxRetriesPerRequest: null }, concurrency: PER_PROCESS_RUNNING },
    )
    worker.on('error', (err) => console.error(`worker ${process.pid}: ${err.message}`))
    await worker.waitUntilReady()
    close = () => worker.close()
  }
  process.on('disconnect', () => process.exit(0)) // the parent is gone
  process.send({ ready: true })
  process.on('message', async (message) => {
    if (message === 'count') process.send({ count: runs.length })
    else if (message === 'report') process.send({ runs })
    else if (message === 'cpu') process.send({ cpu: process.cpuUsage() })
    else if (message === 'stop') {
      await close()
      process.exit(0)
    }
  })
}

/** Forks `REPLICAS` runner (kind 'snatch') or worker (kind 'bullmq') processes of `handler`; resolves when ready. */
async function startFleet(kind, url, handler) {
  const children = Array.from({ length: REPLICAS }, () =>
    fork(__filename, ['--child', kind, url, handler], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
  )
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', resolve))))
  const ask = (c, message, key) =>
    new Promise((resolve) => {
      const on = (reply) => {
        if (key in reply) {
          c.off('message', on)
          resolve(reply[key])
        }
      }
      c.on('message', on)
      c.send(message)
    })
  return {
    count: async () => (await Promise.all(children.map((c) => ask(c, 'count', 'count')))).reduce((a, b) => a + b, 0),
    report: () => Promise.all(children.map((c) => ask(c, 'report', 'runs'))),
    /** CPU seconds the runner processes used so far, together. */
    cpu: async () => (await Promise.all(children.map((c) => ask(c, 'cpu', 'cpu')))).reduce((a, u) => a + (u.user + u.system) / 1e6, 0),
    async stop() {
      for (const c of children) c.send('stop')
      await Promise.all(children.map((c) => new Promise((resolve) => (c.exitCode !== null ? resolve() : c.once('exit', resolve)))))
    },
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Parts.

async function upsertStored(locker, count) {
  return forEach(count, UPSERT_CONCURRENCY, async (i) => {
    const s = scheduleOf(i)
    await locker.upsertSchedule(s.id, { handler: 'digest', cron: s.cron, timezone: s.timezone, data: s.data })
  })
}

async function upsertBull(queue, count) {
  return forEach(count, UPSERT_CONCURRENCY, async (i) => {
    const s = scheduleOf(i)
    await queue.upsertJobScheduler(s.id, { pattern: s.cron, tz: s.timezone }, { name: 'digest', data: s.data })
  })
}

function bullConnection(url) {
  const { hostname, port } = new URL(url)
  return { host: hostname, port: Number(port), maxRetriesPerRequest: null }
}

async function memoryStored(url, count) {
  await redisCommand(url, 'FLUSHALL')
  const before = await usedMemory(url)
  const { createLocker } = require(root)
  const locker = createLocker({ url })
  console.error(`memory: upserting ${count} stored schedules…`)
  const seconds = await upsertStored(locker, count)
  await locker.close()
  const after = await usedMemory(url)
  const keys = await redisCommand(url, 'DBSIZE')
  const sample = await redisCommand(url, 'MEMORY', 'USAGE', `{snatch:${scheduleOf(0).id}}:state`)
  const encoding = await redisCommand(url, 'OBJECT', 'ENCODING', `{snatch:${scheduleOf(0).id}}:state`)
  return { seconds, before, after, keys, perSchedule: (after - before) / count, sampleState: sample, stateEncoding: encoding }
}

async function memoryBull(url, count) {
  await redisCommand(url, 'FLUSHALL')
  const before = await usedMemory(url)
  const { Queue } = require(path.join(__dirname, 'node_modules/bullmq'))
  const queue = new Queue('digest', { connection: bullConnection(url) })
  console.error(`memory: upserting ${count} BullMQ job schedulers…`)
  const seconds = await upsertBull(queue, count)
  await queue.close()
  const after = await usedMemory(url)
  const keys = await redisCommand(url, 'DBSIZE')
  const events = Number((await redisCommand(url, 'MEMORY', 'USAGE', 'bull:digest:events')) ?? 0)
  const delayed = await redisCommand(url, 'ZCARD', 'bull:digest:delayed')
  return { seconds, before, after, keys, events, delayed, perSchedule: (after - before - events) / count }
}

/** Commands per second over `seconds` with `kind`'s fleet of 3 idle processes and `count` schedules stored. */
async function idleCost(kind, url, count, seconds) {
  await redisCommand(url, 'FLUSHALL')
  console.error(`idle: ${kind}, ${count} schedules…`)
  if (kind === 'snatch') {
    const { createLocker } = require(root)
    const locker = createLocker({ url })
    await upsertStored(locker, count)
    await locker.close()
  } else {
    const { Queue } = require(path.join(__dirname, 'node_modules/bullmq'))
    const queue = new Queue('digest', { connection: bullConnection(url) })
    await upsertBull(queue, count)
    await queue.close()
  }
  const fleet = await startFleet(kind, url, 'digest')
  await sleep(10_000)
  const before = await commandCounters(url)
  const t0 = Date.now()
  await sleep(seconds * 1000)
  const after = await commandCounters(url)
  const elapsed = (Date.now() - t0) / 1000
  const ran = await fleet.count()
  await fleet.stop()
  const d = counterDelta(before, after)
  const total = Object.values(d.calls).reduce((a, b) => a + b, 0)
  const top = Object.entries(d.calls)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 8)
    .map(([name, n]) => `${name} ${(n / elapsed).toFixed(2)}`)
    .join(', ')
  return { kind, count, elapsed, processed: d.processed / elapsed, calls: total / elapsed, top, ran }
}

const quantile = (sorted, q) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

/** `count` occurrences due at one instant, 3 processes: runs per id, lag, spread, rate. */
async function burst(kind, url, count) {
  await redisCommand(url, 'FLUSHALL')
  console.error(`burst: ${kind}, ${count} occurrences…`)
  const fleet = await startFleet(kind, url, 'burst')
  // BullMQ refuses custom job ids with ':'
  const ids = Array.from({ length: count }, (_, i) => `burst-${String(i).padStart(18, '0')}`)
  const due = Math.ceil((Date.now() + 20_000) / 1000) * 1000
  let setup
  try {
  if (kind === 'snatch') {
    const { createLocker } = require(root)
    const locker = createLocker({ url })
    setup = await forEach(count, UPSERT_CONCURRENCY, (i) =>
      locker.upsertSchedule(ids[i], { handler: 'burst', at: due, data: { n: i } }),
    )
    await locker.close()
  } else {
    const { Queue } = require(path.join(__dirname, 'node_modules/bullmq'))
    const queue = new Queue('burst', { connection: bullConnection(url) })
    const started = Date.now()
    for (let i = 0; i < count; i += 1000) {
      const delay = due - Date.now()
      await queue.addBulk(ids.slice(i, i + 1000).map((id) => ({ name: 'burst', data: { due }, opts: { jobId: id, delay } })))
    }
    setup = (Date.now() - started) / 1000
    await queue.close()
  }
  if (Date.now() >= due) throw new Error(`setting up the burst took ${setup} s, past its due time`)
  let profiling
  if (process.env.BENCH_PROFILE) {
    await redisCommand(url, 'CONFIG', 'RESETSTAT')
    profiling = { redis: await info(url, 'cpu'), runners: await fleet.cpu() }
  }
  await sleep(due - Date.now())
  const limit = Date.now() + 120_000
  while ((await fleet.count()) < count && Date.now() < limit) await sleep(250)
  if (profiling) {
    console.error(profile(await info(url, 'stats', 'commandstats', 'cpu'), profiling.redis, count))
    console.error(`  runner processes' CPU: ${((await fleet.cpu()) - profiling.runners).toFixed(2)} s`)
  }
  await sleep(5_000) // any run twice would show by now
  var reports = await fleet.report()
  } finally {
    await fleet.stop()
  }
  const perId = new Map()
  const lags = []
  let first = Infinity
  let last = -Infinity
  for (const runs of reports) {
    for (const [id, lag, start] of runs) {
      perId.set(id, (perId.get(id) ?? 0) + 1)
      lags.push(lag)
      first = Math.min(first, start)
      last = Math.max(last, start)
    }
  }
  lags.sort((a, b) => a - b)
  const twice = [...perId.values()].filter((n) => n > 1).length
  const missing = ids.filter((id) => !perId.has(id)).length
  return {
    kind,
    count,
    setup,
    runs: lags.length,
    twice,
    missing,
    p50: quantile(lags, 0.5),
    p99: quantile(lags, 0.99),
    max: lags[lags.length - 1],
    perProcess: reports.map((r) => r.length),
    rate: lags.length / Math.max(0.001, (last - due) / 1000),
    lastStart: (last - due) / 1000,
  }
}

async function clusterSpread(count) {
  const { startCluster } = require(path.join(support, 'deployments'))
  console.error(`cluster: starting 3 masters + 3 replicas, upserting ${count} stored schedules…`)
  const cluster = await startCluster({ masters: 3, replicas: 1, nodeTimeout: 15_000 })
  try {
    const masters = await cluster.masters()
    const before = await Promise.all(masters.map((m) => commandCounters(m.inspectUrl)))
    const { createLocker } = require(root)
    const locker = createLocker({ cluster: cluster.seeds })
    const seconds = await upsertStored(locker, count)
    await locker.close()
    const rows = []
    let largest = { key: '', size: 0 }
    for (const [i, m] of masters.entries()) {
      const after = await commandCounters(m.inspectUrl)
      const d = counterDelta(before[i], after)
      const keys = await redisCommand(m.inspectUrl, 'DBSIZE')
      const dueKeys = []
      let cursor = '0'
      do {
        const [next, batch] = await redisCommand(m.inspectUrl, 'SCAN', cursor, 'MATCH', '*:due:*', 'COUNT', '10000', 'TYPE', 'zset')
        dueKeys.push(...batch)
        cursor = next
      } while (cursor !== '0')
      let entries = 0
      for (const key of dueKeys) {
        const n = await redisCommand(m.inspectUrl, 'ZCARD', key)
        entries += n
        if (n > largest.size) largest = { key, size: n }
      }
      let states = 0
      cursor = '0'
      do {
        const [next, batch] = await redisCommand(m.inspectUrl, 'SCAN', cursor, 'MATCH', '*:state', 'COUNT', '10000', 'TYPE', 'hash')
        states += batch.length
        cursor = next
      } while (cursor !== '0')
      rows.push({ port: m.port, keys, states, dueKeys: dueKeys.length, entries, commands: d.processed, calls: Object.values(d.calls).reduce((a, b) => a + b, 0) })
    }
    return { count, seconds, rows, largest }
  } finally {
    await cluster.stop()
  }
}

// ---------------------------------------------------------------------------------------------------------------

const n = (x) => Math.round(x).toLocaleString('en')
const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`
const verdict = (ok) => (ok ? 'met' : '**not met**')

async function main() {
  const options = parseArgs(process.argv.slice(2))
  require(path.join(root, 'scripts/ensure-built')).ensureBuilt()
  if (!fs.existsSync(path.join(__dirname, 'node_modules/bullmq'))) {
    console.error(`installing the benchmark's peers in ${__dirname} (npm install)…`)
    const result = spawnSync('npm', ['install', '--no-audit', '--no-fund'], { cwd: __dirname, stdio: 'inherit' })
    if (result.status !== 0) throw new Error('npm install in bench/ failed')
  }
  const bullVersion = require(path.join(__dirname, 'node_modules/bullmq/package.json')).version
  const parts = new Set(options.parts)
  const r = {}
  const server = await startRedis()
  try {
    if (parts.has('memory')) {
      r.memStored = await memoryStored(server.url, options.count)
      r.memBull = await memoryBull(server.url, options.count)
    }
    if (parts.has('idle')) {
      r.idle = []
      for (const count of [options.idleSmall, options.count]) r.idle.push(await idleCost('snatch', server.url, count, options.seconds))
      r.idle.push(await idleCost('bullmq', server.url, options.count, options.seconds))
    }
    if (parts.has('burst')) {
      r.burstStored = await burst('snatch', server.url, options.burst)
      r.burstBull = await burst('bullmq', server.url, options.burst)
    }
  } finally {
    await server.stop()
  }
  if (parts.has('cluster')) r.cluster = await clusterSpread(options.count)

  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim()
  const date = new Date().toISOString().slice(0, 10)
  const redisVersion = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout.match(/v=(\S+)/)?.[1]
  const L = [
    `# Stored schedules at scale, against BullMQ ${bullVersion}, ${date}`,
    '',
    `- ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}, redis-server ${redisVersion} ` +
      `(throwaway, the test harness's), redis-snatch HEAD ${git}`,
    `- \`npm run bench:stored -- ${process.argv.slice(2).join(' ')}\``.replace(' -- `', '`'),
    `- each schedule: a 24-byte id (\`user:\` + 19 digits), a daily cron (\`M H * * *\`, at least 11 h away) in one of ` +
      `${ZONES.length} time zones, 64 bytes of data as JSON; upserted ${UPSERT_CONCURRENCY} at a time`,
    '',
  ]
  if (r.memStored) {
    const s = r.memStored
    const b = r.memBull
    L.push(
      `## Memory: ${n(options.count)} schedules`,
      '',
      '| | upsert time | keys | used_memory growth | bytes per schedule |',
      '|---|---:|---:|---:|---:|',
      `| redis-snatch stored schedules | ${s.seconds.toFixed(1)} s (${n(options.count / s.seconds)}/s) | ${n(s.keys)} | ${mib(s.after - s.before)} | **${n(s.perSchedule)}** |`,
      `| BullMQ job schedulers (with ${n(b.delayed)} next delayed jobs; events stream left out) | ${b.seconds.toFixed(1)} s (${n(options.count / b.seconds)}/s) | ${n(b.keys)} | ${mib(b.after - b.before - b.events)} | **${n(b.perSchedule)}** |`,
      '',
      `- BullMQ's events stream (its history, capped by BullMQ at about 10,000 events) took ${mib(b.events)} more; ` +
        `redis-snatch keeps no history until an occurrence runs.`,
      `- redis-snatch: ${n(s.perSchedule)} bytes per schedule = ${(s.perSchedule / b.perSchedule).toFixed(2)}× BullMQ's. ` +
        `One schedule's state hash (spec as compact JSON in fields of at most 64 bytes, next, version) is ${s.sampleState} bytes by ` +
        `MEMORY USAGE (key and overhead included; OBJECT ENCODING: ${s.stateEncoding}); ` +
          'the rest is its due index entry, the keyspace\'s table and the allocator.',
      `- Targets: at most half of BullMQ's: ${verdict(s.perSchedule <= b.perSchedule / 2)}; under 600 bytes: ${verdict(s.perSchedule < 600)}.`,
      '',
    )
  }
  if (r.idle) {
    L.push(
      `## Idle fleet: ${REPLICAS} processes, nothing due within the hour, ${options.seconds} s after 10 s of warm-up`,
      '',
      '| | schedules | commands/s (total_commands_processed) | calls/s (sum of commandstats) | calls/s by command (commandstats; a script\'s own calls count) |',
      '|---|---:|---:|---:|---|',
      ...r.idle.map(
        (i) =>
          `| ${i.kind === 'snatch' ? 'redis-snatch, 3 runners (locker.handle)' : `BullMQ, 3 Workers`} | ${n(i.count)} | ` +
          `**${i.processed.toFixed(2)}** | ${i.calls.toFixed(2)} | ${i.top} |`,
      ),
      '',
    )
    const [small, big] = r.idle
    L.push(
      `- Target: at most 5/s in all and independent of the number of schedules: ${verdict(big.processed <= 5 && small.processed <= 5)} ` +
        `(${small.processed.toFixed(2)}/s at ${n(small.count)}, ${big.processed.toFixed(2)}/s at ${n(big.count)}).`,
      `- Occurrences run during the idle windows: ${r.idle.map((i) => i.ran).join(', ')} (none expected).`,
      '',
    )
  }
  if (r.burstStored) {
    const row = (b, label) =>
      `| ${label} | ${b.setup.toFixed(1)} s | ${n(b.runs)} | ${b.twice} | ${b.missing} | ${b.p50} / ${b.p99} / ${b.max} | ` +
      `${b.perProcess.join(' / ')} | ${b.lastStart.toFixed(2)} s | **${n(b.rate)}** |`
    const s = r.burstStored
    L.push(
      `## ${n(options.burst)} occurrences due in the same second, ${REPLICAS} processes, handler of 1 ms, at most ${PER_PROCESS_RUNNING} at once per process`,
      '',
      '| | set up | runs | ids run twice | ids not run | start lag p50 / p99 / max ms | runs per process | last start after due | occurrences/s |',
      '|---|---:|---:|---:|---:|---:|---|---:|---:|',
      row(s, 'redis-snatch: one-off stored schedules (`at`), 3 runners'),
      row(r.burstBull, 'BullMQ: delayed jobs (addBulk), 3 Workers (concurrency 100)'),
      '',
      `- Lag: start of the handler minus the due time (ctx.tick; BullMQ: the instant the jobs were delayed to), same clock.`,
      `- Targets: every one exactly once: ${verdict(s.twice === 0 && s.missing === 0 && s.runs === s.count)}; ` +
        `p99 under 1 s: ${verdict(s.p99 < 1000)}; spread over the replicas: ${verdict(s.perProcess.every((x) => x > 0))}.`,
      '',
    )
  }
  if (r.cluster) {
    const c = r.cluster
    L.push(
      `## Cluster: ${n(c.count)} stored schedules on 3 masters + 3 replicas`,
      '',
      `Upserted in ${c.seconds.toFixed(1)} s (${n(c.count / c.seconds)}/s) through \`createLocker({ cluster })\`.`,
      '',
      '| master | keys | state hashes | due index buckets | due index entries | commands during the upserts (total_commands_processed) | calls (commandstats) |',
      '|---|---:|---:|---:|---:|---:|---:|',
      ...c.rows.map((x) => `| :${x.port} | ${n(x.keys)} | ${n(x.states)} | ${x.dueKeys} | ${n(x.entries)} | ${n(x.commands)} | ${n(x.calls)} |`),
      '',
      `- Largest key: \`${c.largest.key}\`, ${n(c.largest.size)} entries (${((100 * c.largest.size) / c.count).toFixed(1)}% of the schedules).`,
      '',
    )
  }
  const text = L.join('\n')
  const full = options.count === 100_000 && options.burst === 10_000 && options.seconds >= 60 && parts.size === 4
  const file = path.join(__dirname, 'results', `${date}-stored${full ? '' : '-quick'}.md`)
  fs.writeFileSync(file, text)
  console.log(text)
  console.error(`written to ${path.relative(process.cwd(), file)}`)
}

if (process.argv[2] === '--child') child(process.argv[3], process.argv[4], process.argv[5])
else
  main().catch((err) => {
    console.error(err.stack || err.message)
    process.exitCode = 1
  })
