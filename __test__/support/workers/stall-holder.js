'use strict'
// A process that holds a lock (withLock, ttl 1 s; maxStall from argv[2] unless 'default') and, when told
// `{ block: ms }`, blocks its event loop for that long (a synchronous busy loop), then reports when the block began
// (`blockedAt`), what its signal says (within a second of the loop turning again) and what redis-snatch:lost said.

const dc = require('node:diagnostics_channel')
const { createLocker } = require('../../..')

const maxStall = process.argv[2] === 'default' ? undefined : Number(process.argv[2])
const locker = createLocker({ url: process.env.REDIS_URL, prefix: process.env.SNATCH_PREFIX, ttl: 1000, maxStall })
const lost = []
dc.subscribe('redis-snatch:lost', ({ key, reason }) => lost.push({ key, reason }))

locker
  .withLock('held', async ({ signal }) => {
    const { block } = await new Promise((resolve) => {
      process.once('message', resolve)
      process.send({ event: 'locked' })
    })
    const blockedAt = Date.now()
    const until = blockedAt + block
    while (Date.now() < until) {
      // the loop is blocked
    }
    // The loop turns again: a loss is heard in one of its next turns (give it a second).
    if (!signal.aborted) {
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, 1000)
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
      })
    }
    const { aborted, reason } = signal
    process.send({ event: 'unblocked', blockedAt, aborted, code: reason?.code, reason: reason?.reason, lost })
  })
  .then(
    () => process.send({ event: 'ended' }),
    (err) => process.send({ event: 'ended', code: err.code, reason: err.reason }),
  )
  .finally(() => locker.close().then(() => process.disconnect()))
