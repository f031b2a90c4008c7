'use strict'
// A replica process for the dashboard tests: schedules `report` (every 2 s, 50 ms of work), `sync` (every 3 s, fails)
// and `cleanup` (hourly) on REDIS_URL as instance `instanceId` (its first argument), reports `{ ready }` over IPC,
// and closes its locker and exits on `stop`.

const { createLocker } = require('../../..')

const locker = createLocker({ url: process.env.REDIS_URL, instanceId: process.argv[2], commandTimeout: 500 })
const tasks = [
  locker.schedule('report', '*/2 * * * * *', () => new Promise((resolve) => setTimeout(resolve, 50))),
  locker.schedule('sync', '*/3 * * * * *', () => {
    throw new Error('upstream answered 503 <b>Service Unavailable</b>')
  }),
  locker.schedule('cleanup', '0 * * * *', () => {}),
]
for (const task of tasks) task.on('error', () => {})
process.on('message', async (message) => {
  if (message === 'stop') {
    await locker.close()
    process.disconnect()
  }
})
process.send('ready')
