'use strict'
// `npm run bench:memory`: what locking many distinct keys leaves in Redis. On a throwaway redis-server, locks and
// releases N distinct keys (snatchTask, 200 at a time) and reports Redis' used_memory and key count right after and
// once fenceTtl has passed (and Redis' active expiry has removed what expired). With SNATCH_BASE set to another
// build's directory (say, one from before fence counters expired), that build is measured the same way, on an
// emptied server, for comparison. Writes results/<date>-memory.md and prints it.
//
//   npm run bench:memory -- [--keys 1000000] [--fence-ttl 10000]

const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { ensureBuilt } = require('../scripts/ensure-built')

const root = path.join(__dirname, '..')
const { startRedis, redisCommand } = require(path.join(root, '__test__/support/redis-server'))

const CONCURRENCY = 200
const POLL_MS = 500
/** How long to wait for Redis' active expiry to empty the database after fenceTtl, at most. */
const EXPIRY_LIMIT_MS = 10 * 60_000

/** `--keys` and `--fence-ttl` from argv. */
function parseArgs(argv) {
  const options = { keys: 1_000_000, fenceTtl: 10_000 }
  for (let i = 0; i < argv.length; i++) {
    const value = Number(argv[i + 1])
    if (argv[i] === '--keys' && value > 0) options.keys = value
    else if (argv[i] === '--fence-ttl' && value > 0) options.fenceTtl = value
    else {
      console.error('usage: npm run bench:memory -- [--keys N] [--fence-ttl ms]')
      process.exit(2)
    }
    i++
  }
  return options
}

/** Redis' used_memory (bytes) and number of keys. */
async function usage(url) {
  const info = await redisCommand(url, 'INFO', 'memory')
  const used = Number(/used_memory:(\d+)/.exec(info)[1])
  return { used, keys: await redisCommand(url, 'DBSIZE') }
}

/** Locks and releases `count` distinct keys with the package at `dir`, `CONCURRENCY` at a time; the seconds it took. */
async function lockMany(dir, url, count, fenceTtl) {
  const { createLocker } = require(dir)
  const locker = createLocker({ url, prefix: 'mem:', fenceTtl })
  const started = process.hrtime.bigint()
  let next = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < count) {
        const key = `order:${next++}`
        if (!(await locker.snatchTask(key, () => {})).ran) throw new Error(`${key} was not free`)
      }
    }),
  )
  await locker.close()
  return Number(process.hrtime.bigint() - started) / 1e9
}

/** Measures one build: used memory before, right after locking `keys` keys, and once fenceTtl has passed. */
async function measure(label, dir, url, { keys, fenceTtl }) {
  await redisCommand(url, 'FLUSHALL')
  const empty = await usage(url)
  console.error(`${label}: locking and releasing ${keys} distinct keys…`)
  const seconds = await lockMany(dir, url, keys, fenceTtl)
  const after = await usage(url)
  console.error(`${label}: ${after.keys} keys, waiting for fenceTtl (${fenceTtl} ms) and expiry…`)
  const waitedFrom = Date.now()
  await new Promise((resolve) => setTimeout(resolve, fenceTtl))
  let later = await usage(url)
  while (later.keys > 0 && Date.now() - waitedFrom < fenceTtl + EXPIRY_LIMIT_MS) {
    await new Promise((resolve) => setTimeout(resolve, POLL_MS))
    const now = await usage(url)
    if (now.keys === later.keys && Date.now() - waitedFrom > fenceTtl + 5_000) break // nothing expires (no ttls)
    later = now
  }
  return { label, seconds, empty, after, later, waited: (Date.now() - waitedFrom) / 1000 }
}

const mib = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

async function main() {
  const options = parseArgs(process.argv.slice(2))
  ensureBuilt()
  const server = await startRedis()
  const rows = []
  try {
    rows.push(await measure('redis-snatch (this build)', root, server.url, options))
    if (process.env.SNATCH_BASE) {
      rows.push(await measure(`redis-snatch at ${process.env.SNATCH_BASE}`, path.resolve(process.env.SNATCH_BASE), server.url, options))
    }
  } finally {
    await server.stop()
  }
  const git = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).stdout.trim()
  const lines = [
    `# redis-snatch: Redis memory after many distinct keys, ${new Date().toISOString().slice(0, 10)}`,
    '',
    `- ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim()}), Node ${process.version}, HEAD ${git}`,
    `- ${options.keys.toLocaleString('en')} distinct keys locked and released (snatchTask, ${CONCURRENCY} at a time) ` +
      `on an emptied throwaway redis-server; fenceTtl ${options.fenceTtl} ms (a build without it ignores it)`,
    '- "after": right after the last release; "later": once fenceTtl had passed and Redis\' active expiry had ' +
      'removed what expired (or nothing changed any more)',
    '',
    '| build | seconds | keys after | used_memory after | keys later | used_memory later | empty server |',
    '|---|---:|---:|---:|---:|---:|---:|',
    ...rows.map(
      (r) =>
        `| ${r.label} | ${r.seconds.toFixed(1)} | ${r.after.keys.toLocaleString('en')} | ${mib(r.after.used)} | ` +
        `${r.later.keys.toLocaleString('en')} (after ${r.waited.toFixed(0)} s) | ${mib(r.later.used)} | ${mib(r.empty.used)} |`,
    ),
    '',
  ]
  const text = lines.join('\n')
  const file = path.join(__dirname, 'results', `${new Date().toISOString().slice(0, 10)}-memory.md`)
  fs.writeFileSync(file, text)
  console.log(text)
  console.error(`written to ${path.relative(process.cwd(), file)}`)
}

main().catch((err) => {
  console.error(err.stack || err.message)
  process.exitCode = 1
})
