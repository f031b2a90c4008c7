'use strict'
// `npm run demo`: three replica processes race for the same key once a second; each round must run on exactly one.

const { fork } = require('node:child_process')
const path = require('node:path')
const { requireRedisServer, startRedis } = require('../__test__/support/redis-server')

const REPLICAS = ['replica-1', 'replica-2', 'replica-3']
const ROUNDS = 6
const COLUMN = 11
const children = []

process.on('exit', () => {
  for (const child of children) child.kill()
})
process.on('SIGINT', () => process.exit(130))
process.on('SIGTERM', () => process.exit(143))

/** Start (or reuse) Redis, run the replicas, print the table and a verdict; exit code 1 unless every round ran once. */
async function main() {
  let redis = null
  let url = process.env.REDIS_URL
  if (!url) {
    requireRedisServer()
    redis = await startRedis()
    url = redis.url
  }
  console.log(`${REPLICAS.length} replicas race for demo:report once a second, ${ROUNDS} rounds (redis at ${url})\n`)
  const rows = await runReplicas(url)
  if (redis) await redis.stop()

  const problems = rows.flatMap((row, i) => {
    const ran = row.filter((cell) => cell.ran).length
    return ran === 1 ? [] : [`round ${i + 1} ran on ${ran} replicas`]
  })
  if (problems.length === 0) {
    console.log(`\n${ROUNDS} rounds, each ran on exactly one replica`)
  } else {
    console.error(`\nerror: ${problems.join(', ')} (expected exactly one)`)
    process.exitCode = 1
  }
}

/** Fork the replicas, start them on the same second boundary, print each round as it completes; resolve all rows. */
function runReplicas(url) {
  return new Promise((resolve, reject) => {
    const rows = Array.from({ length: ROUNDS }, () => [])
    let ready = 0
    let closed = 0
    let printed = 0
    const timer = setTimeout(() => reject(new Error('the replicas did not finish in time')), (ROUNDS + 20) * 1000)
    console.log(['round', ...REPLICAS.map((name) => name.padEnd(COLUMN)), 'ran'].join(' | '))
    console.log(['-'.repeat(5), ...REPLICAS.map(() => '-'.repeat(COLUMN)), '---'].join('-+-'))

    REPLICAS.forEach((name, index) => {
      const child = fork(path.join(__dirname, 'replica.js'), [name], { env: { ...process.env, REDIS_URL: url } })
      children.push(child)
      child.on('message', (message) => {
        if (message.ready) {
          if (++ready === REPLICAS.length) start()
          return
        }
        rows[message.round - 1][index] = message
        while (printed < ROUNDS && rows[printed].filter(Boolean).length === REPLICAS.length) {
          printRow(printed + 1, rows[printed++])
        }
      })
      child.on('close', (code, signal) => {
        if (code !== 0) {
          clearTimeout(timer)
          reject(new Error(`${name} exited with ${signal || `code ${code}`}`))
        } else if (++closed === REPLICAS.length) {
          clearTimeout(timer)
          if (printed === ROUNDS) resolve(rows)
          else reject(new Error(`the replicas exited after reporting only ${printed} complete rounds`))
        }
      })
    })

    function start() {
      const plan = { runId: process.pid, start: Math.ceil(Date.now() / 1000) * 1000 + 1000, rounds: ROUNDS }
      for (const child of children) child.send(plan)
    }
  })
}

/** Print one table row: ✓ and the fence for the replica that ran the task, · for the others. */
function printRow(round, cells) {
  const marks = cells.map((cell) => (cell.ran ? `✓ fence ${cell.fence}` : '·').padEnd(COLUMN))
  const ran = cells.filter((cell) => cell.ran).length
  console.log([String(round).padStart(5), ...marks, String(ran).padStart(3)].join(' | '))
}

main().catch((err) => {
  console.error(`error: ${err.message}`)
  process.exit(1)
})
