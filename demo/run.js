'use strict'
// `npm run demo`: three replica processes run the same every-second cron job, one with a clock 400 ms behind.
// redis-snatch's schedule() runs every occurrence on exactly one replica; the blog posts' naive SET NX + DEL
// coordinator, under the same skew, runs occurrences twice.

const { fork } = require('node:child_process')
const path = require('node:path')
const { redisFromEnv } = require('../__test__/support/redis-server')
const { ensureBuilt } = require('../scripts/ensure-built')

/** The replicas and their clock offsets (ms). */
const REPLICAS = [
  ['replica-1', 0],
  ['replica-2', 0],
  ['replica-3', -400],
]
const SECONDS = 6
const children = []

process.on('exit', () => {
  for (const child of children) child.kill()
})
process.on('SIGINT', () => process.exit(130))
process.on('SIGTERM', () => process.exit(143))

/** Starts (or reuses) Redis, runs the replicas, prints the table; exit code 1 unless each occurrence ran once. */
async function main() {
  ensureBuilt()
  const redis = await redisFromEnv()
  const { url } = redis
  console.log(`3 replicas schedule the same job every second for ${SECONDS} s; replica-3's clock is 400 ms behind`)
  console.log(`(redis at ${url})\n`)
  const { snatch, naive, first, last } = await runReplicas(url)
  await redis.stop()

  console.log('occurrence   | redis-snatch schedule() | naive SET NX + DEL')
  console.log('-------------+-------------------------+---------------------------------')
  let wrong = 0
  let doubled = 0
  for (let tick = first; tick <= last; tick += 1000) {
    const ours = snatch.get(tick) ?? []
    const theirs = naive.get(tick) ?? []
    if (ours.length !== 1) wrong++
    if (theirs.length > 1) doubled++
    const time = new Date(tick).toISOString().slice(11, 19)
    const cell = (runs) => (runs.length === 0 ? 'nobody' : runs.join(', ')) + (runs.length > 1 ? '  ← twice' : '')
    console.log(`${time.padEnd(12)} | ${cell(ours).padEnd(23)} | ${cell(theirs)}`)
  }
  const count = (last - first) / 1000 + 1
  console.log(`\nredis-snatch: ${count - wrong} of ${count} occurrences ran exactly once`)
  console.log(`naive SET NX + DEL: ${doubled} of ${count} occurrences ran twice`)
  if (wrong > 0) process.exitCode = 1
}

/** Forks the replicas, starts them together, and collects who ran which occurrence with each coordinator. */
function runReplicas(url) {
  return new Promise((resolve, reject) => {
    const snatch = new Map()
    const naive = new Map()
    let ready = 0
    let closed = 0
    const start = Math.ceil(Date.now() / 1000) * 1000 + 1000
    const until = start + SECONDS * 1000
    const timer = setTimeout(() => reject(new Error('the replicas did not finish in time')), (SECONDS + 20) * 1000)
    for (const [name, offset] of REPLICAS) {
      const env = { ...process.env, REDIS_URL: url, SNATCH_TEST_CLOCK_OFFSET_MS: String(offset) }
      const child = fork(path.join(__dirname, 'replica.js'), [name], { env })
      children.push(child)
      child.on('message', (message) => {
        if (message.ready) {
          if (++ready === REPLICAS.length) for (const c of children) c.send({ runId: process.pid, until })
          return
        }
        const runs = message.kind === 'snatch' ? snatch : naive
        runs.set(message.tick, [...(runs.get(message.tick) ?? []), name])
      })
      child.on('close', (code, signal) => {
        if (code !== 0) {
          clearTimeout(timer)
          reject(new Error(`${name} exited with ${signal || `code ${code}`}`))
        } else if (++closed === REPLICAS.length) {
          clearTimeout(timer)
          // Only the occurrences every replica was running for: from the first full second to the last.
          const ticks = [...snatch.keys(), ...naive.keys()]
          resolve({ snatch, naive, first: Math.max(start, Math.min(...ticks)), last: until - 1000 })
        }
      })
    }
  })
}

main().catch((err) => {
  console.error(`error: ${err.message}`)
  process.exit(1)
})
