'use strict'
// A runner process for the stored schedules' tests: on `{ handler, instanceId, prefix, hang, workMs }` it runs that
// handler on REDIS_URL (one locker, made by the first message) and reports over IPC every occurrence it starts
// (`start`, with the stored schedule's id, tick, attempt, why, fence, data and the time `at`) and its handler's 'run'
// and 'error' events. With `hang` the first attempt of each occurrence never settles (the process is to be killed while
// it runs); with `workMs` each takes that long. `{ block: file }` reports `blocked`, then blocks its event loop until
// `file` exists (its runner claims meanwhile, on its own threads, occurrences whose fn cannot be called before the
// loop turns again). `{ stop: true }` closes the locker and exits.

const fs = require('node:fs')
const { createLocker } = require('../../..')

let locker

process.on('message', async (message) => {
  if (message.block) {
    const pause = new Int32Array(new SharedArrayBuffer(4))
    process.send({ event: 'blocked', pid: process.pid }, () => {
      while (!fs.existsSync(message.block)) Atomics.wait(pause, 0, 0, 5)
    })
    return
  }
  if (message.stop) {
    await locker?.close()
    process.disconnect()
    return
  }
  const { handler, instanceId, prefix, hang, workMs } = message
  locker ??= createLocker({ url: process.env.REDIS_URL, instanceId, prefix })
  const pid = process.pid
  const running = locker.handle(handler, async ({ id, data, tick, attempt, why, fence, signal }) => {
    const at = Date.now()
    process.send({ event: 'start', id, data, tick: tick.getTime(), attempt, why, fence: String(fence), pid, at })
    if (hang && attempt === 1) await new Promise(() => {})
    if (workMs) await new Promise((resolve) => setTimeout(resolve, workMs))
    signal.throwIfAborted()
  })
  running.on('run', ({ id, tick, attempt, why }) => process.send({ event: 'run', pid, id, tick: tick.getTime(), attempt, why }))
  running.on('error', (err, { id, tick }) => process.send({ event: 'error', pid, id, tick: tick.getTime(), code: err.code }))
  process.send({ event: 'ready', pid, handler })
})
