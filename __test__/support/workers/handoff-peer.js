'use strict'
// A process that holds or adopts one lock as the parent tells it over IPC (`{ op, ... }`), answering each message
// with what came of it: lock, handoff, adopt, extend, release, close.

const { createLocker } = require('../../..')

const locker = createLocker({ url: process.env.REDIS_URL, prefix: process.env.SNATCH_PREFIX, instanceId: process.env.PEER })
let lock = null

const ops = {
  async lock({ key, ttl }) {
    lock = await locker.lock(key, { ttl, autoExtend: true })
    return { token: lock.token, fence: String(lock.fence) }
  },
  handoff: () => lock.handoff(),
  async adopt({ handle }) {
    lock = await locker.adopt(handle)
    return { fence: String(lock.fence) }
  },
  extend: ({ ttl }) => lock.extend(ttl),
  release: () => lock.release(),
  close: () => locker.close(),
}

process.on('message', async (message) => {
  try {
    process.send({ value: (await ops[message.op](message)) ?? null })
  } catch (err) {
    process.send({ error: { code: err.code, reason: err.reason, message: err.message } })
  }
  if (message.op === 'close') process.disconnect()
})
process.send({ ready: true })
