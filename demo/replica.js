'use strict'
// One demo replica (forked by demo/run.js). For `durationMs` it runs the same every-second job two ways, and tells
// the parent each time it ran an occurrence:
//  - with redis-snatch: `locker.schedule()`;
//  - with the blog posts' naive coordinator: at each second, SET key NX PX, run, DEL.
// Its clock may be skewed (SNATCH_TEST_CLOCK_OFFSET_MS), like a replica whose NTP lags.

const { randomUUID } = require('node:crypto')
const { createLocker } = require('..')
const { redisCommand } = require('../__test__/support/redis-server')

const name = process.argv[2]
const offset = Number(process.env.SNATCH_TEST_CLOCK_OFFSET_MS || 0)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)))
const now = () => Date.now() + offset

/** The job: ~50 ms of work. */
const work = () => sleep(50)

/** The naive coordinator of the posts: SET NX PX at each second of this replica's clock, run, DEL right after. */
async function naive(key, until) {
  for (let tick = Math.ceil(now() / 1000) * 1000; tick < until; tick += 1000) {
    await sleep(tick - now())
    const won = await redisCommand(process.env.REDIS_URL, 'SET', key, randomUUID(), 'NX', 'PX', '5000')
    if (won === 'OK') {
      process.send({ kind: 'naive', tick })
      await work()
      await redisCommand(process.env.REDIS_URL, 'DEL', key)
    }
  }
}

/** Runs both coordinators until `until` (epoch ms on the real clock), then closes and exits. */
async function run({ runId, until }) {
  const locker = createLocker({ url: process.env.REDIS_URL })
  const task = locker.schedule(`demo:report:${runId}`, '*/1 * * * * *', async ({ tick, fence }) => {
    process.send({ kind: 'snatch', tick: tick.getTime(), fence: String(fence) })
    await work()
  })
  task.on('error', (err) => console.error(`${name}: ${err.message}`))
  await Promise.all([naive(`demo:naive:${runId}`, until + offset), sleep(until - Date.now())])
  await locker.close()
  process.disconnect()
}

process.once('message', (plan) =>
  run(plan).catch((err) => {
    console.error(`${name}: ${err.message}`)
    process.exit(1)
  }),
)
process.on('disconnect', () => process.exit(0))
process.send({ ready: true })
