'use strict'
// A process taking permits of one semaphore for the semaphore tests. On `{ url, key, limit, ms, ttl }` it loops for
// `ms` ms over withPermit (each fn holding 1-6 ms) and reports every fn's interval on the monotonic clock (shared by
// all processes, and left alone by the wall-clock shift) with its fence; on `{ url, key, limit, ttl, hold: true }`
// it takes one permit, reports its fence, and keeps it until killed.
const { createLocker } = require('../../..')

process.on('message', async ({ url, key, limit, ms, ttl, hold }) => {
  const locker = createLocker({ url })
  const sem = locker.semaphore(key, limit)
  if (hold) {
    const permit = await sem.acquire({ ttl, wait: 10_000 })
    process.send({ fence: String(permit.fence), wallClock: Date.now() })
    return
  }
  const runs = []
  const end = process.hrtime.bigint() + BigInt(ms) * 1_000_000n
  while (process.hrtime.bigint() < end) {
    await sem.withPermit(
      async ({ fence }) => {
        const enter = process.hrtime.bigint()
        await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * 5))
        runs.push({ enter: String(enter), exit: String(process.hrtime.bigint()), fence: String(fence) })
      },
      { ttl, wait: 30_000 },
    )
  }
  await locker.close()
  process.send({ runs, wallClock: Date.now() }, () => process.disconnect())
})
process.send('ready')
