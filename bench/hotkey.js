'use strict'
// A hot key's waiters (`npm run bench:hotkey [-- --package DIR] [--seconds N] [--out FILE]`): N callers looping
// `withLock(key, fn, { wait })` on one key (fn resolves at once), in one process (1, 10, 50, 100, 500 callers) and in
// 4 processes of 25, racing for each release or, with `fair: true`, served in turn; against a throwaway redis-server
// per case. For each: handoffs/s (withLock calls that got the key), Redis commands per handoff (INFO commandstats,
// calls made by scripts included), and how long a call waited for the key (median, 99th percentile, longest).
// `--package DIR` measures another checkout of redis-snatch (say, the build before) with the same script, without
// the fair cases. Prints a Markdown table.

const { fork } = require('node:child_process')
const path = require('node:path')
const { startRedis, commandCalls } = require('../__test__/support/redis-server')

const { option, publish } = require('./lib/cli')
const pkg = process.env.HOTKEY_PACKAGE || path.resolve(option('--package', path.join(__dirname, '..')))
const seconds = Number(option('--seconds', 5))
const withFair = !process.argv.includes('--package')
const CASES = [
  [1, 1, false],
  [1, 10, false],
  [1, 50, false],
  [1, 50, true],
  [1, 100, false],
  [1, 500, false],
  [4, 25, false],
  [4, 25, true],
].filter(([, , fair]) => withFair || !fair)

/**
 * In a child process: `callers` loops of withLock on the hot key until told to stop; reports the handoffs, and the
 * waits (ms) of the calls made since the last count.
 */
async function child() {
  const { url, callers, fair } = JSON.parse(process.argv[2])
  const { createLocker } = require(pkg)
  const locker = createLocker({ url })
  let handoffs = 0
  let waits = []
  let stopping = false
  process.on('message', (message) => {
    if (message === 'count') {
      process.send({ handoffs, waits })
      waits = []
    }
    if (message === 'stop') stopping = true
  })
  const options = fair ? { wait: 30_000, fair: true } : { wait: 30_000 }
  const loop = async () => {
    while (!stopping) {
      const started = performance.now()
      await locker.withLock('hot', async () => waits.push(performance.now() - started), options)
      handoffs++
    }
  }
  process.send({ ready: true })
  await Promise.all(Array.from({ length: callers }, loop))
  await locker.close()
  process.send({ handoffs, done: true })
  process.disconnect()
}

/** Asks every child its count; resolves their sum, and the waits of the calls since the last count. */
async function count(children) {
  const counts = children.map((c) => {
    const counted = new Promise((resolve) => c.once('message', resolve))
    c.send('count')
    return counted
  })
  const answers = await Promise.all(counts)
  return { handoffs: answers.reduce((a, b) => a + b.handoffs, 0), waits: answers.flatMap((a) => a.waits) }
}

/** The `q` quantile of sorted `values`. */
const quantile = (values, q) => values[Math.min(values.length - 1, Math.floor(q * values.length))]

/** One case: `processes` × `callers` (fair or not) on a fresh server, 1 s of warm-up then `seconds` measured. */
async function measure(processes, callers, fair) {
  const server = await startRedis()
  const children = Array.from({ length: processes }, () =>
    fork(__filename, [JSON.stringify({ url: server.url, callers, fair })], {
      env: { ...process.env, HOTKEY_CHILD: '1', HOTKEY_PACKAGE: pkg },
    }),
  )
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', resolve))))
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const [{ handoffs: before }, calls] = await Promise.all([count(children), commandCalls(server.url)])
  const started = process.hrtime.bigint()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const [{ handoffs: after, waits }, callsAfter] = await Promise.all([count(children), commandCalls(server.url)])
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9
  const exited = children.map((c) => new Promise((resolve) => c.once('exit', resolve)))
  children.forEach((c) => c.send('stop'))
  await Promise.all(exited)
  await server.stop()
  const handoffs = after - before
  waits.sort((a, b) => a - b)
  // The INFO call of the measurement is not the waiters'.
  return {
    handoffsPerSecond: handoffs / elapsed,
    commandsPerHandoff: (callsAfter - calls - 1) / handoffs,
    waits: [0.5, 0.99, 1].map((q) => quantile(waits, q).toFixed(1)).join(' / '),
  }
}

async function main() {
  const rows = []
  for (const [processes, callers, fair] of CASES) {
    const r = await measure(processes, callers, fair)
    const who = (processes === 1 ? `${callers}` : `${processes} processes × ${callers}`) + (fair ? ', fair' : '')
    const perSecond = Math.round(r.handoffsPerSecond).toLocaleString('en-US')
    rows.push(`| ${who} | ${perSecond} | ${r.commandsPerHandoff.toFixed(1)} | ${r.waits} |`)
    console.error(rows.at(-1))
  }
  const report = [
    `Hot key, ${seconds} s per case, ${pkg}:`,
    '',
    '| waiters | handoffs/s | Redis commands per handoff | wait for the key, ms: median / p99 / longest |',
    '|---:|---:|---:|---:|',
    ...rows,
  ].join('\n')
  publish(report)
}

if (process.env.HOTKEY_CHILD) child()
else main()
