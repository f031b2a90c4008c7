'use strict'

const { fork } = require('node:child_process')
const path = require('node:path')
const { redisCommand, startRedis } = require('../support/redis-server')
const { until } = require('../support/util')

/** Forks a contender and resolves once it is loaded and waiting for the start message. */
function startContender() {
  const child = fork(path.join(__dirname, '..', 'support', 'workers', 'contender.js'), { env: process.env })
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child))
    child.once('error', reject)
  })
}

/**
 * Races 4 processes x 5 concurrent snatchTask calls on one key; resolves how many ran in total. A run goes on until
 * every call has run or lost (so a call cannot come after it, however slow its process).
 */
async function race(urls) {
  const key = `processes:${process.pid}:${Date.now()}`
  const children = await Promise.all(Array.from({ length: 4 }, startContender))
  let settled = 0
  const reports = children.map(
    (child) =>
      new Promise((resolve) =>
        child.on('message', (m) => {
          if (m.event === 'done') resolve(m)
          else settled++ // running or lost
        }),
      ),
  )
  for (const child of children) child.send({ key, attempts: 5, urls })
  await until(() => settled === 20, 'every call to run or lose', 20_000)
  for (const child of children) child.send({ finish: true })
  return (await Promise.all(reports)).reduce((total, r) => total + r.ran, 0)
}

test('4 processes x 5 concurrent snatchTask calls on one key: exactly one runs', async () => {
  expect(await race()).toBe(1)
})

test('the same race over a Redlock set of 3 servers: exactly one runs', async () => {
  const servers = await Promise.all([startRedis(), startRedis(), startRedis()])
  try {
    expect(await race(servers.map((s) => s.url))).toBe(1)
  } finally {
    await Promise.all(servers.map((s) => s.stop()))
  }
})

/** Runs `code` in a fresh Node process with IPC; resolves its exit code once it exits by itself. */
function runScript(code, execArgv = []) {
  const child = fork('-e', [code], { execArgv, env: process.env, cwd: path.join(__dirname, '..', '..') })
  const exited = new Promise((resolve) => child.once('exit', (status) => resolve(status)))
  return { child, exited }
}

test('a script that used the module-level snatchTask exits by itself without close()', async () => {
  const { child, exited } = runScript(`
    require('.').snatchTask('lifetime:${process.pid}:${Date.now()}', () => 7).then((r) => {
      process.send(r.value)
      process.disconnect()
    })
  `)
  const value = new Promise((resolve) => child.once('message', resolve))
  expect(await value).toBe(7)
  expect(await exited).toBe(0)
})

test('a held autoExtend lock keeps the process alive until it ends', async () => {
  const key = `alive:${process.pid}:${Date.now()}`
  const { child, exited } = runScript(`
    require('.').createLocker().tryLock('${key}', { ttl: 1000, autoExtend: true }).then((lock) => {
      process.send('held')
      process.disconnect()
    })
  `)
  await new Promise((resolve) => child.once('message', resolve))
  // Nothing but the renewed lease is left in the child; it would be gone within milliseconds if that did not count.
  await new Promise((resolve) => setTimeout(resolve, 500)) // time passes, in which the child must not exit
  expect(child.exitCode).toBeNull()
  await redisCommand(process.env.REDIS_URL, 'DEL', `snatch:${key}`)
  expect(await exited).toBe(0)
})

/** Runs `code` with --expose-gc, collecting garbage every 20 ms; resolves its first message, or how it exited. */
async function runWithGc(code) {
  const { child, exited } = runScript(
    `setTimeout(() => process.exit(3), 8000).unref()
    setInterval(() => global.gc(), 20)
    ${code}`,
    ['--expose-gc'],
  )
  const message = new Promise((resolve) => child.once('message', resolve))
  const result = await Promise.race([message, exited.then((code) => `exited with ${code}`)])
  child.kill()
  return result
}

test('a Locker nothing refers to any more is garbage-collected', async () => {
  const result = await runWithGc(`
    globalThis.registry = new FinalizationRegistry(() => process.send('collected'))
    ;(async () => {
      const locker = require('.').createLocker()
      registry.register(locker, 'locker')
      await locker.snatchTask('gc:${process.pid}:${Date.now()}', () => {})
    })()
  `)
  expect(result).toBe('collected')
})

test('a schedule keeps its Locker, and so keeps running, when the program keeps only the schedule', async () => {
  const result = await runWithGc(`
    globalThis.task = require('.').createLocker().schedule('gc:${process.pid}:${Date.now()}', '* * * * * *', () => {})
    let runs = 0
    task.on('run', () => ++runs === 2 && task.stop().then(() => process.send(runs)))
  `)
  expect(result).toBe(2)
}, 10000)
