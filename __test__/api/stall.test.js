'use strict'
// maxStall, measured on real blocks of a process's event loop: a 3 s block keeps the lease (the renewal runs on a
// native thread), a block past maxStall frees the key within maxStall + ttl, and when the loop turns again the
// signal has aborted with the reason.

const { fork } = require('node:child_process')
const path = require('node:path')
const { redisCommand } = require('../support/redis-server')
const { sleep, uniqueKey, until } = require('../support/util')

jest.setTimeout(30_000)

/** A holder process with `maxStall` ('default' for none given); resolves it once it holds the lock. */
async function holder(maxStall) {
  const prefix = `${uniqueKey('stall')}:`
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'stall-holder.js'), [String(maxStall)], {
    env: { ...process.env, SNATCH_PREFIX: prefix },
  })
  const events = []
  const waiters = []
  child.on('message', (m) => {
    events.push(m)
    for (const w of waiters.splice(0)) w()
  })
  const next = async (event) => {
    for (;;) {
      const found = events.find((m) => m.event === event)
      if (found) return found
      await new Promise((resolve) => waiters.push(resolve))
    }
  }
  await next('locked')
  const pttl = () => redisCommand(process.env.REDIS_URL, 'PTTL', `${prefix}held`)
  return { child, next, pttl }
}

test('a 3 s block keeps the lease: the key is held all along, and the signal has not aborted', async () => {
  const { child, next, pttl } = await holder('default')
  child.send({ block: 3000 })
  const seen = []
  const started = Date.now()
  while (Date.now() - started < 3000) {
    seen.push(await pttl())
    await sleep(200) // the key read every 200 ms while the block lasts
  }
  expect(seen.every((ms) => ms > 0)).toBe(true)
  expect(await next('unblocked')).toMatchObject({ aborted: false, lost: [] })
  expect((await next('ended')).code).toBeUndefined()
})

test('a block past maxStall frees the key within maxStall + ttl; the loop back, the signal says it stalled', async () => {
  const maxStall = 1000
  const ttl = 1000
  const { child, next, pttl } = await holder(maxStall)
  child.send({ block: 5000 })
  await until(async () => (await pttl()) === -2, 'the key to be free', 10_000)
  const freedAt = Date.now()
  const unblocked = await next('unblocked')
  // From when the child's loop blocked (its own clock, the machine's: not when the message left here).
  const freedAfter = freedAt - unblocked.blockedAt
  console.log(`blocked for good: the key was free ${freedAfter} ms after the block began (maxStall ${maxStall}, ttl ${ttl})`)
  expect(freedAfter).toBeLessThanOrEqual(maxStall + ttl + 200)
  expect(freedAfter).toBeGreaterThan(maxStall)
  expect(unblocked).toMatchObject({ aborted: true, code: 'ERR_SNATCH_LOCK_LOST', reason: 'stalled' })
  expect(unblocked.lost).toEqual([{ key: 'held', reason: 'stalled' }])
  expect(await next('ended')).toMatchObject({ code: 'ERR_SNATCH_LOCK_LOST', reason: 'stalled' })
})

test('maxStall is checked', () => {
  const { createLocker } = require('../..')
  for (const maxStall of [0, -1, 1.5, 2 ** 31]) {
    expect(() => createLocker({ url: process.env.REDIS_URL, maxStall })).toThrow(
      expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringContaining('maxStall') }),
    )
  }
  expect(() => createLocker({ url: process.env.REDIS_URL, maxStall: '30s' })).toThrow(TypeError)
})
