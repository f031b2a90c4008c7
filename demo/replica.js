'use strict'
// One demo replica (forked by demo/run.js): at each round's wall-clock second it races the other replicas for
// the job's key, and reports { round, ran, fence } to the parent.

const { createLocker } = require('..')

const name = process.argv[2]
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The task that must run once per round: ~100 ms of work, returning who did it. */
async function report() {
  await sleep(100)
  return name
}

/** Run every round of the plan the parent sent, then close the locker and let the process end. */
async function run({ runId, start, rounds }) {
  const locker = createLocker({ url: process.env.REDIS_URL })
  for (let round = 1; round <= rounds; round++) {
    await sleep(start + (round - 1) * 1000 - Date.now())
    // One key for every round, like a cron job's. minHold keeps it for 900 ms after acquisition even though the
    // task ends after 100 ms, so a replica arriving late in the same round cannot run it again.
    const result = await locker.snatchTask(`demo:report:${runId}`, report, { minHold: 900 })
    process.send({ round, ran: result.ran, fence: result.ran ? String(result.fence) : null })
  }
  await locker.close()
  process.off('disconnect', exitWithParent)
  process.disconnect()
}

function exitWithParent() {
  process.exit(1)
}

process.on('disconnect', exitWithParent)
process.once('message', (plan) => {
  run(plan).catch((err) => {
    console.error(`${name}: ${err.message}`)
    process.exit(1)
  })
})
process.send({ ready: true })
