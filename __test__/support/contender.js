'use strict'
// A separate process racing for one key: on the parent's message `{ key, attempts, urls? }` it makes that many
// concurrent snatchTask calls (on REDIS_URL, or on the Redlock set `urls`) and reports how many ran.

const { createLocker } = require('../..')

process.once('message', async ({ key, attempts, urls }) => {
  const locker = createLocker(urls ? { urls } : { url: process.env.REDIS_URL })
  const results = await Promise.all(
    Array.from({ length: attempts }, () =>
      locker.snatchTask(key, () => new Promise((resolve) => setTimeout(() => resolve(process.pid), 200))),
    ),
  )
  await locker.close()
  process.send({ ran: results.filter((r) => r.ran).length })
  process.disconnect()
})
process.send({ ready: true })
