'use strict'
// A separate process racing for one key: on the parent's message `{ key, attempts, urls? }` it makes that many
// concurrent snatchTask calls (on REDIS_URL, or on the Redlock set `urls`), reports each call that runs (`running`: its
// fn goes on until the parent sends `{ finish: true }`) and each that loses (`lost`), then how many ran (`done`).

const { createLocker } = require('../../..')

const finishers = []

process.on('message', async (message) => {
  if (message.finish) return finishers.splice(0).forEach((finish) => finish())
  const { key, attempts, urls } = message
  const locker = createLocker(urls ? { urls } : { url: process.env.REDIS_URL })
  const run = () => {
    process.send({ event: 'running' })
    return new Promise((resolve) => finishers.push(() => resolve(process.pid)))
  }
  const results = await Promise.all(
    Array.from({ length: attempts }, () =>
      locker.snatchTask(key, run).then((result) => (result.ran || process.send({ event: 'lost' }), result)),
    ),
  )
  await locker.close()
  process.send({ event: 'done', ran: results.filter((r) => r.ran).length })
  process.disconnect()
})
process.send({ event: 'ready' })
