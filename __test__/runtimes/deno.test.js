'use strict'
// The package under Deno 2 (the npm package `deno`, a dev dependency), loaded with `createRequire` as a Deno user
// would: a runtime that runs N-API modules without exporting libuv's functions. There the direct connection is off
// and every call takes the main connection; the rest works.

const { spawnSync } = require('node:child_process')
const path = require('node:path')

const deno = path.join(__dirname, '..', '..', 'node_modules', '.bin', 'deno')

test('under Deno: snatchTask, a woken waiter, a schedule tick and 1,000 runs', () => {
  const smoke = path.join(__dirname, '..', 'support', 'workers', 'runtime-smoke.mjs')
  const result = spawnSync(deno, ['run', '--allow-all', smoke, process.env.REDIS_URL], {
    encoding: 'utf8',
    timeout: 60_000,
    env: { ...process.env, NO_COLOR: '1' },
  })
  expect(result.error).toBeUndefined()
  expect(result.stderr).toBe('')
  expect(result.status).toBe(0)
  const summary = JSON.parse(result.stdout.trim().split('\n').pop())
  expect(summary).toEqual({ runtime: expect.stringMatching(/^deno 2\./), first: true, handedOff: true, ticks: 1, ran: 1000, direct: 0 })
})
