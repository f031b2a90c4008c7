'use strict'
// Read-write locks (`npm run bench:rwlock [-- --seconds N] [--rounds N] [--out FILE]`): 50 loops in one process,
// each cycle a lock taken and released around an fn that resolves at once, against a throwaway redis-server:
// `withLock` on a key of each loop's own (the reference), `withRead` on one shared key (readers hold at once),
// `withRead` on a key of each loop's own, and `withWrite` on a key of each loop's own. Cases interleaved, `--rounds`
// times; cycles/s, medians. Then a handoff: the time from a write lock's release to the last of 20 readers of
// another locker waiting for it being in, 20 times. Prints Markdown tables.

const { createLocker } = require('..')
const { startRedis } = require('../__test__/support/redis-server')
const { option, publish } = require('./lib/cli')

const seconds = Number(option('--seconds', 4))
const rounds = Number(option('--rounds', 3))
const LOOPS = 50

const CASES = {
  'withLock, own keys': (locker, i) => locker.withLock(`own:${i}`, async () => {}),
  'withRead, one shared key': (locker) => locker.rwlock('shared').withRead(async () => {}),
  'withRead, own keys': (locker, i) => locker.rwlock(`read:${i}`).withRead(async () => {}),
  'withWrite, own keys': (locker, i) => locker.rwlock(`write:${i}`).withWrite(async () => {}),
}

/** The handoff case: how many readers wait, how many times. */
const [READERS, HANDOFFS] = [20, 20]

/** Ms from the release of a write lock of `key` (held by `locker`) to the last of READERS readers of `readers` in. */
async function handoff(locker, readers, key) {
  const writer = await locker.rwlock(key).write({ ttl: 10_000 })
  const rw = readers.rwlock(key)
  const waiting = Array.from({ length: READERS }, () =>
    rw.read({ wait: 10_000, ttl: 10_000 }).then((lock) => ({ lock, at: performance.now() })),
  )
  await new Promise((resolve) => setTimeout(resolve, 100))
  const released = performance.now()
  await writer.release()
  const entered = await Promise.all(waiting)
  await Promise.all(entered.map(({ lock }) => lock.release()))
  return Math.max(...entered.map(({ at }) => at - released))
}

/** Cycles/s of `cycle` in LOOPS loops for `seconds`. */
async function measure(locker, cycle) {
  let count = 0
  const end = Date.now() + seconds * 1000
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, i) => {
      while (Date.now() < end) {
        await cycle(locker, i)
        count++
      }
    }),
  )
  return count / seconds
}

async function main() {
  const server = await startRedis()
  const [locker, readers] = [createLocker({ url: server.url }), createLocker({ url: server.url })]
  const results = Object.fromEntries(Object.keys(CASES).map((name) => [name, []]))
  const handoffs = []
  try {
    for (let round = 0; round < rounds; round++) {
      for (const [name, cycle] of Object.entries(CASES)) results[name].push(await measure(locker, cycle))
    }
    for (let round = 0; round < HANDOFFS; round++) handoffs.push(await handoff(locker, readers, `handoff:${round}`))
  } finally {
    await Promise.all([locker.close(), readers.close()])
    await server.stop()
  }
  const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]
  const reference = median(results['withLock, own keys'])
  const lines = [
    `Read-write locks, ${LOOPS} loops, ${rounds} × ${seconds} s per case (interleaved), medians; Node ${process.version}`,
    '',
    '| case | cycles/s | × withLock |',
    '|---|---:|---:|',
    ...Object.entries(results).map(([name, values]) => {
      const m = median(values)
      return `| ${name} | ${Math.round(m).toLocaleString('en')} | ${(m / reference).toFixed(2)}× |`
    }),
    '',
    `From a write lock's release to the last of ${READERS} readers waiting for it in (another locker), ${HANDOFFS} times:`,
    `median ${median(handoffs).toFixed(1)} ms, max ${Math.max(...handoffs).toFixed(1)} ms.`,
  ]
  publish(lines.join('\n'))
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
