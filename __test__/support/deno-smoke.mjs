// Run under Deno by __test__/deno.test.js, as a Deno user loads the package (`createRequire`): snatchTask, a lock
// whose waiter is woken by its release, a schedule's tick and 1,000 runs, against the Redis at the first argument;
// prints a JSON summary and exits 0, or exits 1 with the error.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const { createLocker } = require('../..')

async function main(url) {
  const locker = createLocker({ url, prefix: `deno:${Deno.pid}:` })
  const first = await locker.snatchTask('first', ({ fence }) => fence)
  const held = await locker.lock('handoff', { ttl: 10_000 })
  const waited = locker.withLock('handoff', ({ fence }) => fence, { wait: 5000 })
  setTimeout(() => held.release(), 50)
  const handedOff = await waited
  const ticks = []
  const task = locker.schedule('tick', '* * * * * *', ({ tick }) => ticks.push(tick.getTime()))
  while (ticks.length < 1) await new Promise((resolve) => setTimeout(resolve, 20))
  await task.stop()
  let ran = 0
  await Promise.all(
    Array.from({ length: 50 }, async (_, loop) => {
      for (let i = 0; i < 20; i++) if ((await locker.snatchTask(`run:${loop}`, () => i)).ran) ran++
    }),
  )
  await locker.close()
  return { runtime: `deno ${Deno.version.deno}`, first: first.ran, handedOff: handedOff > held.fence, ticks: ticks.length, ran }
}

try {
  console.log(JSON.stringify(await main(Deno.args[0])))
  Deno.exit(0)
} catch (err) {
  console.error(err)
  Deno.exit(1)
}
