'use strict'
// A process of shared() callers: on `{ key, callers, fnMs, resultTtl, ttl }` it makes `callers` concurrent calls of
// locker.shared(key), whose fn reports `{ event: 'run', fence }` and returns `{ pid, fence }` after `fnMs` (with
// `fnMs: null`, once the test sends `{ finish: true }`); then it reports `{ event: 'results', values, errors }` (fences
// as strings). REDIS_URL and SNATCH_PREFIX from the environment.

const { createLocker } = require('../../..')

const locker = createLocker({ url: process.env.REDIS_URL, prefix: process.env.SNATCH_PREFIX })
const pid = process.pid

let finish = () => {}

process.on('message', async (message) => {
  if (message.finish) return finish()
  const { key, callers, fnMs, resultTtl, ttl } = message
  const fn = async ({ fence }) => {
    process.send({ event: 'run', pid, fence: String(fence) })
    await new Promise((resolve) => (fnMs === null ? (finish = resolve) : setTimeout(resolve, fnMs)))
    return { pid, fence }
  }
  const settled = await Promise.allSettled(Array.from({ length: callers }, () => locker.shared(key, fn, { resultTtl, ttl, wait: 30_000 })))
  const values = settled.filter((s) => s.status === 'fulfilled').map((s) => ({ pid: s.value.pid, fence: String(s.value.fence) }))
  const errors = settled.filter((s) => s.status === 'rejected').map((s) => s.reason.code ?? s.reason.message)
  process.send({ event: 'results', pid, values, errors })
})
process.send({ event: 'ready', pid })
