'use strict'
// A hot key's waiters (`npm run bench:hotkey [-- --package DIR] [--seconds N] [--out FILE]`): N callers looping
// `withLock(key, fn, { wait })` on one key (fn resolves at once), in one process (1, 10, 100, 500 callers) and in 4
// processes of 25, against a throwaway redis-server per case. For each: handoffs/s (withLock calls that got the key)
// and Redis commands per handoff (INFO commandstats, calls made by scripts included). `--package DIR` measures another
// checkout of redis-snatch (say, the build before) with the same script. Prints a Markdown table.

const { fork } = require('node:child_process')
const path = require('node:path')
const { startRedis, commandCalls } = require('../__test__/support/redis-server')

const { option, publish } = require('./lib/cli')
const pkg = process.env.HOTKEY_PACKAGE || path.resolve(option('--package', path.join(__dirname, '..')))
const seconds = Number(option('--seconds', 5))
const CASES = [
  [1, 1],
  [1, 10],
  [1, 100],
  [1, 500],
  [4, 25],
]

/** In a child process: `callers` loops of withLock on the hot key until told to stop; reports the handoffs. */
async function child() {
  const { url, callers } = JSON.parse(process.argv[2])
  const { createLocker } = require(pkg)
  const locker = createLocker({ url })
  let handoffs = 0
  let stopping = false
  process.on('message', (message) => {
    if (message === 'count') process.send({ handoffs })
    if (message === 'stop') stopping = true
  })
  const loop = async () => {
    while (!stopping) {
      await locker.withLock('hot', async () => {}, { wait: 30_000 })
      handoffs++
    }
  }
  process.send({ ready: true })
  await Promise.all(Array.from({ length: callers }, loop))
  await locker.close()
  process.send({ handoffs, done: true })
  process.disconnect()
}

/** Asks every child its count; resolves their sum. */
async function count(children) {
  const counts = children.map((c) => {
    const counted = new Promise((resolve) => c.once('message', (m) => resolve(m.handoffs)))
    c.send('count')
    return counted
  })
  return (await Promise.all(counts)).reduce((a, b) => a + b, 0)
}

/** One case: `processes` × `callers` on a fresh server, 1 s of warm-up then `seconds` measured. */
async function measure(processes, callers) {
  const server = await startRedis()
  const children = Array.from({ length: processes }, () =>
    fork(__filename, [JSON.stringify({ url: server.url, callers })], {
      env: { ...process.env, HOTKEY_CHILD: '1', HOTKEY_PACKAGE: pkg },
    }),
  )
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('message', resolve))))
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const [before, calls] = await Promise.all([count(children), commandCalls(server.url)])
  const started = process.hrtime.bigint()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const [after, callsAfter] = await Promise.all([count(children), commandCalls(server.url)])
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9
  const exited = children.map((c) => new Promise((resolve) => c.once('exit', resolve)))
  children.forEach((c) => c.send('stop'))
  await Promise.all(exited)
  await server.stop()
  const handoffs = after - before
  // The INFO call of the measurement is not the waiters'.
  return { handoffsPerSecond: handoffs / elapsed, commandsPerHandoff: (callsAfter - calls - 1) / handoffs }
}

async function main() {
  const rows = []
  for (const [processes, callers] of CASES) {
    const r = await measure(processes, callers)
    const who = processes === 1 ? `${callers}` : `${processes} processes × ${callers}`
    rows.push(`| ${who} | ${Math.round(r.handoffsPerSecond).toLocaleString('en-US')} | ${r.commandsPerHandoff.toFixed(1)} |`)
    console.error(rows.at(-1))
  }
  const report = [
    `Hot key, ${seconds} s per case, ${pkg}:`,
    '',
    '| waiters | handoffs/s | Redis commands per handoff |',
    '|---:|---:|---:|',
    ...rows,
  ].join('\n')
  publish(report)
}

if (process.env.HOTKEY_CHILD) child()
else main()
