'use strict'
// A replica for the shutdown tests, with the SIGTERM recipe of docs/locks.md (close with a timeout, then exit). On
// `{ schedule, cron, fnMs }` it schedules `schedule`, whose fn reports `start`, runs `fnMs` or until its signal aborts,
// then reports `end` (and rejects when it aborted); on `{ withLock, ms }` it runs a withLock whose fn takes `ms` (its
// signal ignored), reporting `locked` and `unlocked`. REDIS_URL, SNATCH_PREFIX, TTL_MS and DRAIN_MS from the environment.

const { createLocker } = require('../../..')

const locker = createLocker({ url: process.env.REDIS_URL, ttl: Number(process.env.TTL_MS) })
const pid = process.pid
const report = (event) => process.connected && process.send({ pid, ...event })

// The recipe of docs/locks.md.
process.once('SIGTERM', async () => {
  await locker.close({ timeout: Number(process.env.DRAIN_MS) })
  report({ event: 'closed' })
  process.exit(0)
})

process.on('message', (message) => {
  if (message.schedule) {
    const task = locker.schedule(message.schedule, message.cron, async ({ tick, attempt, why, signal }) => {
      report({ event: 'start', tick: tick.getTime(), attempt, why, at: Date.now() })
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, message.fnMs)
        signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true })
      })
      report({ event: 'end', tick: tick.getTime(), attempt, aborted: signal.aborted, reason: signal.reason?.code })
      // Cut short: it did not finish (a fn that resolves is done, and not run again).
      signal.throwIfAborted()
    })
    task.on('error', () => {})
    report({ event: 'ready' })
  } else if (message.withLock) {
    locker
      .withLock(message.withLock, async () => {
        report({ event: 'locked' })
        await new Promise((resolve) => setTimeout(resolve, message.ms))
        report({ event: 'unlocked' })
        return 'done'
      })
      .then((value) => report({ event: 'withLock', value }), (err) => report({ event: 'withLock', error: err.code }))
  }
})
