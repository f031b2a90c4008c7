'use strict'
// A replica with fair waiters (fair.test.js): on `{ url, key, n, wait }` it waits fairly for `key` up to `wait` ms
// and reports `{ n, fence }` once it holds it (then releases it), or `{ n, error }` with the error's code.

const { createLocker } = require('../../..')

let locker
process.on('message', async ({ url, key, n, wait }) => {
  locker ??= createLocker({ url })
  try {
    const lock = await locker.lock(key, { fair: true, wait, ttl: 10_000 })
    process.send({ n, fence: String(lock.fence) })
    await lock.release()
  } catch (err) {
    process.send({ n, error: err.code })
  }
})
process.send('ready')
