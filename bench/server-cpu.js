'use strict'
// `npm run bench:server-cpu`: what one withfn cycle costs the server, on Valkey 9.1 or Redis 8 (INFO commandstats:
// the microseconds the server spent in each command, per cycle), against the floor: the same cycle done by a raw
// ioredis client with SET NX PX, INCR (the fence) and the server's own compare-and-delete (Valkey's DELIFEQ, Redis's
// DELEX … IFEQ). Each side runs 50 loops on their own keys in a process of its own, after a warmup, on an emptied
// server with its statistics reset. With SNATCH_BASE set to another build's directory, that build is measured too
// (before and after). Writes results/<date>-server-cpu.md (-redis8 for Redis 8) and prints it.
//
//   npm run bench:server-cpu -- [--seconds 5] [--reps 3] [--server valkey|redis8]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { fork } = require('node:child_process')
const { ensureBuilt } = require('../scripts/ensure-built')

const root = path.join(__dirname, '..')
const { startRedis, redisCommand } = require(path.join(root, '__test__/support/redis-server'))

const LOOPS = 50
const WARMUP_MS = 1000

/** The servers: the name of their version in INFO, and their compare-and-delete. */
const SERVERS = {
  valkey: { version: 'valkey_version', name: 'Valkey', compareAndDelete: (key, token) => ['DELIFEQ', key, token] },
  redis8: { version: 'redis_version', name: 'Redis', compareAndDelete: (key, token) => ['DELEX', key, 'IFEQ', token] },
}

/** The sides: a label, and what a loop's cycle is (run in the child, see `child`). */
const SIDES = [
  { id: 'floor', label: 'raw ioredis: SET NX PX, INCR, its compare-and-delete (the floor)' },
  { id: 'snatch', label: 'redis-snatch snatchTask (this build)', dir: root },
  ...(process.env.SNATCH_BASE
    ? [{ id: 'base', label: `redis-snatch snatchTask at ${process.env.SNATCH_BASE}`, dir: path.resolve(process.env.SNATCH_BASE) }]
    : []),
]

/** `--seconds`, `--reps` and `--server` from argv. */
function parseArgs(argv) {
  const options = { seconds: 5, reps: 3, server: 'valkey' }
  for (let i = 0; i < argv.length; i += 2) {
    const value = Number(argv[i + 1])
    if (argv[i] === '--seconds' && value > 0) options.seconds = value
    else if (argv[i] === '--reps' && value > 0) options.reps = value
    else if (argv[i] === '--server' && SERVERS[argv[i + 1]]) options.server = argv[i + 1]
    else {
      console.error('usage: npm run bench:server-cpu -- [--seconds N] [--reps N] [--server valkey|redis8]')
      process.exit(2)
    }
  }
  return options
}

/** The server's microseconds and calls per command since its statistics were reset (INFO commandstats). */
async function commandStats(url) {
  const stats = {}
  for (const [, name, calls, usec] of (await redisCommand(url, 'INFO', 'commandstats')).matchAll(
    /cmdstat_([^:]+):calls=(\d+),usec=(\d+)/g,
  )) {
    stats[name] = { calls: Number(calls), usec: Number(usec) }
  }
  return stats
}

/** One side's run in a child process: the cycles it made in `ms` after the warmup (the child resets the stats). */
function runSide(side, url, ms, server) {
  return new Promise((resolve, reject) => {
    const child = fork(__filename, ['--child', JSON.stringify({ side, url, ms, server })])
    child.once('message', resolve)
    child.once('exit', (code) => reject(new Error(`the ${side.id} side exited (${code}) without a result`)))
  })
}

/** In the child: 50 loops of the side's cycle, a warmup, the statistics reset, then `ms` counted. */
async function child({ side, url, ms, server }) {
  let cycle
  let close
  if (side.id === 'floor') {
    const Redis = require(require.resolve('ioredis', { paths: [__dirname, root] }))
    const client = new Redis(url)
    let n = 0
    cycle = async (key) => {
      const token = `t${n++}`
      if ((await client.set(key, token, 'PX', 30_000, 'NX')) !== 'OK') throw new Error(`${key} was taken`)
      await client.incr(`${key}:fence`)
      await client.call(...SERVERS[server].compareAndDelete(key, token))
    }
    close = () => client.quit()
  } else {
    const { createLocker } = require(side.dir)
    const locker = createLocker({ url, prefix: 'cpu:' })
    cycle = async (key) => {
      if (!(await locker.snatchTask(key, async () => {})).ran) throw new Error(`${key} was taken`)
    }
    close = () => locker.close()
  }
  let counting = false
  let stop = false
  let cycles = 0
  const loops = Array.from({ length: LOOPS }, async (_, i) => {
    while (!stop) {
      await cycle(`w${i}`)
      if (counting) cycles++
    }
  })
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS))
  await redisCommand(url, 'CONFIG', 'RESETSTAT')
  counting = true
  await new Promise((resolve) => setTimeout(resolve, ms))
  const stats = await commandStats(url)
  stop = true
  await Promise.all(loops)
  await close()
  process.send({ cycles, stats }, () => process.exit(0))
}

/** Per cycle: the server's µs in all (INFO and CONFIG aside) and each command's calls and µs. */
function perCycle({ cycles, stats }) {
  const commands = Object.entries(stats).filter(([name]) => !/^(info|config)\b/.test(name))
  const usec = commands.reduce((sum, [, s]) => sum + s.usec, 0) / cycles
  const each = commands
    .sort(([, a], [, b]) => b.usec - a.usec)
    .map(([name, s]) => `${name} ${(s.calls / cycles).toFixed(2)}× ${(s.usec / cycles).toFixed(2)} µs`)
  return { usec, each: each.join(', ') }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

async function main() {
  const options = parseArgs(process.argv.slice(2))
  ensureBuilt()
  const { serverBinary } = require('./lib/servers')
  const { version: field, name } = SERVERS[options.server]
  const server = await startRedis({ binary: serverBinary(options.server) })
  const version = new RegExp(`${field}:(\\S+)`).exec(await redisCommand(server.url, 'INFO', 'server'))?.[1]
  const rows = Object.fromEntries(SIDES.map((side) => [side.id, []]))
  try {
    for (let rep = 0; rep < options.reps; rep++) {
      for (const side of SIDES) {
        await redisCommand(server.url, 'FLUSHALL')
        console.error(`rep ${rep + 1}/${options.reps}: ${side.id}…`)
        rows[side.id].push(perCycle(await runSide(side, server.url, options.seconds * 1000, options.server)))
      }
    }
  } finally {
    await server.stop()
  }
  const floor = median(rows.floor.map((r) => r.usec))
  const lines = [
    `# Server CPU per withfn cycle on ${name} ${version}, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- Machine: ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}`,
    `- ${LOOPS} loops on their own keys, ${options.seconds} s per run after a ${WARMUP_MS} ms warmup, ${options.reps} ` +
      'repetitions interleaved, each on an emptied server with its statistics reset (CONFIG RESETSTAT)',
    '- µs per cycle: the sum over the commands of INFO commandstats (INFO and CONFIG aside), divided by the cycles; ' +
      'the median of the repetitions',
    '',
    '| side | µs per cycle | × floor | commands per cycle (calls, µs), last repetition |',
    '|---|---|---|---|',
  ]
  for (const side of SIDES) {
    const usec = median(rows[side.id].map((r) => r.usec))
    const last = rows[side.id].at(-1).each
    lines.push(`| ${side.label} | ${usec.toFixed(2)} | ${(usec / floor).toFixed(2)} | ${last} |`)
  }
  const text = `${lines.join('\n')}\n`
  const suffix = options.server === 'valkey' ? '' : `-${options.server}`
  const file = path.join(__dirname, 'results', `${new Date().toISOString().slice(0, 10)}-server-cpu${suffix}.md`)
  fs.writeFileSync(file, text)
  console.log(text)
  console.error(`written to ${path.relative(process.cwd(), file)}`)
}

if (process.argv[2] === '--child') child(JSON.parse(process.argv[3]))
else {
  main().catch((err) => {
    console.error(err)
    process.exit(1)
  })
}
