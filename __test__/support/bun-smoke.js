'use strict'
// Run under Bun by __test__/bun.test.js: snatchTask, a lock whose waiter is woken by its release, a schedule's tick
// and 1,000 runs, against the Redis at argv[2]; prints a JSON summary and exits 0, or exits 1 with the error.

const { createLocker } = require('../..')

async function main(url) {
  const locker = createLocker({ url, prefix: `bun:${process.pid}:` })
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
  return { runtime: process.versions.bun ? `bun ${process.versions.bun}` : `node ${process.version}`, first: first.ran, handedOff: handedOff > held.fence, ticks: ticks.length, ran }
}

main(process.argv[2]).then(
  (summary) => {
    console.log(JSON.stringify(summary))
    process.exit(0)
  },
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
