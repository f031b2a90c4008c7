'use strict'
// A replica process for the schedule fleet tests: on each `{ name, cron, options, hangFirst, fail, workMs, instanceId,
// prefix }` it schedules that job on REDIS_URL (one locker for them all, made by the first) and reports over IPC every
// attempt it starts (`start`) and ends (`end`, with `workMs`), each with the time (`at`), and every event of the
// schedule (`run`, `skip`, `error`, with `at`), each with its tick in epoch ms. With `hangFirst` the first attempt of an
// occurrence never settles (the process is to be killed while it runs); with `fail` every attempt throws; with
// `workMs` every attempt takes that long. `{ stop: true }` closes the locker and exits.

const { createLocker } = require('../../..')

let locker

process.on('message', async (message) => {
  if (message.stop) {
    await locker?.close()
    process.disconnect()
    return
  }
  const { name, cron, options, hangFirst, fail, workMs, instanceId, prefix } = message
  locker ??= createLocker({ url: process.env.REDIS_URL, instanceId, prefix })
  const task = locker.schedule(
    name,
    cron,
    async ({ tick, attempt, why, fence }) => {
      const at = Date.now()
      process.send({ event: 'start', tick: tick.getTime(), attempt, why, fence: String(fence), pid: process.pid, at })
      if (hangFirst && attempt === 1) await new Promise(() => {})
      if (fail) throw new Error(`${name} fails`)
      if (workMs) {
        await new Promise((resolve) => setTimeout(resolve, workMs))
        process.send({ event: 'end', tick: tick.getTime(), pid: process.pid, at: Date.now() })
      }
    },
    options,
  )
  const pid = process.pid
  task.on('run', ({ tick, attempt, why }) => process.send({ event: 'run', pid, tick: tick.getTime(), attempt, why }))
  task.on('skip', ({ tick, reason }) => process.send({ event: 'skip', pid, tick: tick.getTime(), reason, at: Date.now() }))
  task.on('error', (err, { tick, attempt, why }) =>
    process.send({ event: 'error', pid, tick: tick.getTime(), attempt, why, code: err.code, message: err.message }),
  )
  process.send({ event: 'ready', pid: process.pid, name })
})
