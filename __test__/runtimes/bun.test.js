'use strict'
// The package under Bun (the npm package `bun`, a dev dependency): a runtime that runs N-API modules without libuv's
// socket polling, which the direct connection needs. Its lockers use the main connection, and work.

const { spawnSync } = require('node:child_process')
const path = require('node:path')

const bun = path.join(__dirname, '..', '..', 'node_modules', '.bin', 'bun')

test('under Bun: snatchTask, a woken waiter, a schedule tick and 1,000 runs', () => {
  const smoke = path.join(__dirname, '..', 'support', 'workers', 'runtime-smoke.mjs')
  const result = spawnSync(bun, [smoke, process.env.REDIS_URL], { encoding: 'utf8', timeout: 60_000 })
  expect(result.error).toBeUndefined()
  expect(result.stderr).toBe('')
  expect(result.status).toBe(0)
  const summary = JSON.parse(result.stdout.trim().split('\n').pop())
  expect(summary).toEqual({ runtime: expect.stringMatching(/^bun 1\./), first: true, handedOff: true, ticks: 1, ran: 1000, direct: 0 })
})
