'use strict'
// A replica process for the scheduler tests: on `{ name, cron, durationMs, workMs }` it schedules that job on
// REDIS_URL (its clock shifted by SNATCH_TEST_CLOCK_OFFSET_MS, if set), stops after durationMs, and reports the
// occurrences it ran and the skips and errors it saw.

const { createLocker } = require('../../..')

process.once('message', async ({ name, cron, durationMs, workMs }) => {
  const locker = createLocker({ url: process.env.REDIS_URL })
  const report = { ran: [], skipped: [], errors: [] }
  const task = locker.schedule(name, cron, async ({ tick }) => {
    report.ran.push(tick.getTime())
    await new Promise((resolve) => setTimeout(resolve, workMs))
  })
  task.on('skip', ({ tick, reason }) => report.skipped.push({ tick: tick.getTime(), reason }))
  task.on('error', (err) => report.errors.push(err.message))
  await new Promise((resolve) => setTimeout(resolve, durationMs))
  await locker.close()
  process.send(report)
  process.disconnect()
})
process.send({ ready: true })
