'use strict'
// Shared results (`npm run bench:shared [-- --seconds N] [--out FILE]`): rounds of 50 concurrent callers of one key
// (a new key each round), fn taking 2 ms of CPU: `locker.shared()` (one run, 49 callers get its value), 50 callers
// each running fn (no coordination), and a hand-written "lock, run, store, the others poll the result every 5 ms" on
// raw ioredis; in 1 process of 50 callers and in 5 processes of 10, against a throwaway redis-server per case. For
// each: rounds/s, fn runs per round, Redis commands per round (INFO commandstats, calls made by scripts included).
// Prints a Markdown table.

const { fork } = require('node:child_process')
const path = require('node:path')
const { startRedis, commandCalls } = require('../__test__/support/redis-server')
const { option, publish } = require('./lib/cli')

const seconds = Number(option('--seconds', 5))
const CALLERS = 50
const WAYS = ['shared', 'everyone runs fn', 'poll (raw ioredis)']

/** fn: 2 ms of CPU, then a value. */
function work() {
  const until = performance.now() + 2
  while (performance.now() < until) {
    // busy
  }
  return { ok: true }
}

/**
 * In a child process: on `{ round }`, `callers` concurrent calls for key `round` by `way`; answers with the fn runs
 * made.
 */
function child() {
  const { url, way, callers } = JSON.parse(process.argv[2])
  const Redis = require('ioredis')
  const { createLocker } = require('..')
  const locker = createLocker({ url })
  const redis = new Redis(url)
  const ways = {
    shared: (key, count) => locker.shared(key, () => (count(), work()), { resultTtl: 10_000 }),
    'everyone runs fn': async (_key, count) => (count(), work()),
    'poll (raw ioredis)': async (key, count) => {
      for (;;) {
        const stored = await redis.get(`${key}:result`)
        if (stored !== null) return JSON.parse(stored)
        if ((await redis.set(`${key}:lock`, '1', 'PX', 10_000, 'NX')) === 'OK') {
          count()
          const value = work()
          await redis.set(`${key}:result`, JSON.stringify(value), 'PX', 10_000)
          await redis.del(`${key}:lock`)
          return value
        }
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    },
  }
  process.on('message', async ({ round, stop }) => {
    if (stop) {
      await Promise.all([locker.close(), redis.quit()])
      return process.disconnect()
    }
    let runs = 0
    await Promise.all(Array.from({ length: callers }, () => ways[way](`bench:shared:${round}`, () => runs++)))
    process.send({ runs })
  })
  process.send({ ready: true })
}

/** `processes` children of `CALLERS / processes` callers each, by `way`, for `seconds`: the case's figures. */
async function measure(way, processes) {
  const server = await startRedis()
  const children = Array.from({ length: processes }, () =>
    fork(__filename, [JSON.stringify({ url: server.url, way, callers: CALLERS / processes })], { env: { ...process.env, SHARED_BENCH_CHILD: '1' } }),
  )
  const next = (c) => new Promise((resolve) => c.once('message', resolve))
  await Promise.all(children.map(next))
  const before = await commandCalls(server.url)
  const started = performance.now()
  let [rounds, runs] = [0, 0]
  while (performance.now() - started < seconds * 1000) {
    const answers = children.map(next)
    children.forEach((c) => c.send({ round: rounds }))
    runs += (await Promise.all(answers)).reduce((n, a) => n + a.runs, 0)
    rounds++
  }
  const elapsed = (performance.now() - started) / 1000
  const commands = (await commandCalls(server.url)) - before - 1
  children.forEach((c) => c.send({ stop: true }))
  await Promise.all(children.map((c) => new Promise((resolve) => c.once('exit', resolve))))
  await server.stop()
  return { rounds: rounds / elapsed, runs: runs / rounds, commands: commands / rounds }
}

async function main() {
  const lines = [
    `Rounds of ${CALLERS} concurrent callers of one key (fn: 2 ms of CPU), ${seconds} s per case, Node ${process.version}.`,
    '',
    '| way | processes x callers | rounds/s | fn runs per round | Redis commands per round |',
    '|---|---|---:|---:|---:|',
  ]
  for (const processes of [1, 5]) {
    for (const way of WAYS) {
      const r = await measure(way, processes)
      lines.push(`| ${way} | ${processes} x ${CALLERS / processes} | ${r.rounds.toFixed(0)} | ${r.runs.toFixed(2)} | ${r.commands.toFixed(1)} |`)
    }
  }
  publish(lines.join('\n'))
}

if (process.env.SHARED_BENCH_CHILD) child()
else main()
