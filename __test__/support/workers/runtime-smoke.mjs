// Run under Bun and Deno by __test__/runtimes/bun.test.js and deno.test.js, the package loaded with `createRequire` (as a Deno
// user does; Bun takes it too): snatchTask, a lock whose waiter is woken by its release, a schedule's tick and 1,000
// runs, against the Redis at the first argument; prints a JSON summary (with how many locks diagnostics_channel said
// were taken by direct calls: none where libuv is not) and exits 0, or exits 1 with the error.
import dc from 'node:diagnostics_channel'
import { createRequire } from 'node:module'
import process from 'node:process'

const require = createRequire(import.meta.url)
const { createLocker } = require('../../..')
const { redisCommand } = require('../redis-server')
const { until } = require('../util')

/** The runtime and its version: `bun 1.x`, `deno 2.x`, or `node vN`. */
function runtime() {
  if (process.versions.bun) return `bun ${process.versions.bun}`
  if (process.versions.deno) return `deno ${process.versions.deno}`
  return `node ${process.version}`
}

async function main(url) {
  let direct = 0
  dc.subscribe('redis-snatch:acquire', (message) => {
    if (message.direct) direct++
  })
  const prefix = `smoke:${process.pid}:`
  const locker = createLocker({ url, prefix })
  const first = await locker.snatchTask('first', ({ fence }) => fence)
  const held = await locker.lock('handoff', { ttl: 10_000 })
  const waited = locker.withLock('handoff', ({ fence }) => fence, { wait: 5000 })
  // Released once the waiter waits: it marked the holder's token as waited for.
  await until(async () => (await redisCommand(url, 'GET', `${prefix}handoff`)).endsWith('*'), 'the waiter to wait')
  await held.release()
  const handedOff = await waited
  const ticks = []
  const task = locker.schedule('tick', '* * * * * *', ({ tick }) => ticks.push(tick.getTime()))
  await until(() => ticks.length >= 1, 'a tick')
  await task.stop()
  let ran = 0
  await Promise.all(
    Array.from({ length: 50 }, async (_, loop) => {
      for (let i = 0; i < 20; i++) if ((await locker.snatchTask(`run:${loop}`, () => i)).ran) ran++
    }),
  )
  await locker.close()
  return { runtime: runtime(), first: first.ran, handedOff: handedOff > held.fence, ticks: ticks.length, ran, direct }
}

try {
  console.log(JSON.stringify(await main(process.argv[2])))
  process.exit(0)
} catch (err) {
  console.error(err)
  process.exit(1)
}
