'use strict'
// A replica process for the leader tests: on `{ name, ttl, retry, instanceId }` it campaigns for `name` on REDIS_URL
// and reports over IPC, on process.hrtime.bigint() (one monotonic clock for every process of the host): 'elected'
// { term, t }, an 'act' { term, t } every 10 ms while leader (each done only while ctx.validUntil is ahead: the check
// that holds also right after a SIGSTOP), 'cut' { term, t } when it stopped acting, 'revoked' { term, reason }.
// `{ resign: true }` resigns; `{ stop: true }` stops campaigning, closes the locker and exits.

const { createLocker } = require('../../..')

const now = () => String(process.hrtime.bigint())
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const send = (message) => process.connected && process.send({ pid: process.pid, ...message })

let locker
let leadership

process.on('message', async (message) => {
  if (message.stop) {
    await leadership?.stop()
    await locker?.close()
    process.disconnect()
    return
  }
  if (message.resign) {
    await leadership.resign()
    return
  }
  const { name, ttl, retry, instanceId } = message
  locker = createLocker({ url: process.env.REDIS_URL, instanceId })
  leadership = locker.lead(
    name,
    async (ctx) => {
      const term = String(ctx.term)
      send({ event: 'elected', term, t: now() })
      for (;;) {
        await sleep(10)
        if (ctx.signal.aborted || ctx.validUntil <= Date.now()) break
        send({ event: 'act', term, t: now() })
      }
      send({ event: 'cut', term, t: now() })
    },
    { ttl, retry },
  )
  leadership.on('revoked', ({ term, reason }) => send({ event: 'revoked', term: String(term), reason }))
  leadership.on('error', (err) => send({ event: 'error', code: err.code, message: err.message }))
  send({ event: 'ready' })
})
