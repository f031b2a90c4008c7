'use strict'
// Leaders (`npm run bench:leaders [-- --handovers N] [--idle S] [--out FILE]`): how soon observers see a new leader,
// and what an idle observer costs Redis. Against a throwaway redis-server per library: two lockers campaign for one
// name (ttl 3 s), the leader resigns `--handovers` times; 10 observers (each its own locker) watch, and each hand-over
// is timed from the new leader's 'elected' to each observer's 'change' naming it (one process: one clock; below 0
// when an observer heard before the leader's own process called its fn). Then, with
// a leader that stays, Redis commands over `--idle` s (INFO commandstats, calls made by scripts included) with and
// without the 10 observers: what they add, per observer per second, and their script calls (a read is one; the old
// observer polled with one) per leader lease. With SNATCH_BASE (another
// build, as `npm run bench` takes it), the same for that build, for a before/after comparison.

const path = require('node:path')
const { startRedis, commandCalls } = require('../__test__/support/redis-server')
const { option, publish } = require('./lib/cli')

const HANDOVERS = Number(option('--handovers', 10))
const IDLE_S = Number(option('--idle', 20))
const OBSERVERS = 10
const TTL_MS = 3000

/** fn of a leader: leads until its signal aborts. */
const untilAborted = ({ signal }) => new Promise((resolve) => signal.addEventListener('abort', resolve))

/** The `p`th percentile of sorted `values`. */
const percentile = (values, p) => values[Math.min(values.length - 1, Math.floor((p / 100) * values.length))]

/** The figures of the redis-snatch at `root`. */
async function measure(root) {
  const { createLocker } = require(root)
  const server = await startRedis()
  const made = []
  const locker = (instanceId) => {
    const l = createLocker({ url: server.url, instanceId, ttl: TTL_MS })
    made.push(l)
    return l
  }
  const name = 'bench:lead'
  const seen = Array.from({ length: OBSERVERS }, () => [])
  const observers = seen.map((log, i) => {
    const observer = locker(`observer-${i}`).observe(name)
    observer.on('change', ({ leader }) => log.push({ leader, at: performance.now() }))
    return observer
  })
  const [a, b] = [locker('a'), locker('b')]
  const elections = []
  const campaign = (l, who) => {
    const leadership = l.lead(name, untilAborted, { retry: 200 })
    leadership.on('elected', () => elections.push({ who, at: performance.now() }))
    return leadership
  }
  const leaders = { a: campaign(a, 'a'), b: campaign(b, 'b') }
  const lags = []
  const until = async (check) => {
    for (const deadline = performance.now() + 30_000; !check(); ) {
      if (performance.now() > deadline) throw new Error('no leader change within 30 s')
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }
  await until(() => elections.length > 0)
  let since = 0
  for (let n = 0; n < HANDOVERS; n++) {
    const current = elections.at(-1)
    await until(() => seen.every((log) => log.some((c) => c.leader === current.who && c.at >= since)))
    since = performance.now()
    await leaders[current.who].resign()
    await until(() => elections.length > n + 1)
    const next = elections.at(-1)
    // (The campaign notes its term before its fn is called: an observer may hear of it first, a lag below 0.)
    await until(() => seen.every((log) => log.some((c) => c.leader === next.who && c.at >= since)))
    for (const log of seen) lags.push(log.find((c) => c.leader === next.who && c.at >= since).at - next.at)
  }
  lags.sort((x, y) => x - y)
  // Idle: a leader that stays (b stops campaigning), observed and not.
  await leaders.b.stop()
  await until(() => leaders.a.isLeader)
  /** Redis commands, and script calls (each read is one), over IDLE_S s. */
  const idle = async () => {
    const before = [await commandCalls(server.url), await commandCalls(server.url, 'evalsha')]
    await new Promise((resolve) => setTimeout(resolve, IDLE_S * 1000))
    const after = [await commandCalls(server.url), await commandCalls(server.url, 'evalsha')]
    return { commands: after[0] - before[0] - 2, calls: after[1] - before[1] }
  }
  const observed = await idle()
  for (const observer of observers) observer.close()
  const alone = await idle()
  await Promise.all(made.map((l) => l.close()))
  await server.stop()
  const perObserver = (observed.commands - alone.commands) / OBSERVERS / IDLE_S
  const readsPerLease = ((observed.calls - alone.calls) / OBSERVERS / IDLE_S) * (TTL_MS / 1000)
  return { lags, perObserver, readsPerLease }
}

async function main() {
  const roots = [['redis-snatch', path.join(__dirname, '..')]]
  if (process.env.SNATCH_BASE) roots.push([`redis-snatch at ${process.env.SNATCH_BASE}`, path.resolve(process.env.SNATCH_BASE)])
  const lines = [
    `${OBSERVERS} observers of one leadership (ttl ${TTL_MS} ms), ${HANDOVERS} hand-overs by resign(), then ${IDLE_S} s ` +
      `idle with a leader; Node ${process.version}, one redis-server.`,
    '',
    '| library | observer sees the new leader: median / p90 / max | idle observer: Redis commands per second | its script calls (reads) per leader lease |',
    '|---|---:|---:|---:|',
  ]
  for (const [label, root] of roots) {
    const r = await measure(root)
    const ms = (v) => `${v.toFixed(1)} ms`
    lines.push(
      `| ${label} | ${ms(percentile(r.lags, 50))} / ${ms(percentile(r.lags, 90))} / ${ms(r.lags.at(-1))} | ` +
        `${r.perObserver.toFixed(2)} | ${r.readsPerLease.toFixed(2)} |`,
    )
  }
  publish(lines.join('\n'))
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
