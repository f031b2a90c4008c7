'use strict'

const { fork } = require('node:child_process')
const path = require('node:path')
const { redisCommand, startRedis } = require('./support/redis-server')

/** Forks a contender and resolves once it is loaded and waiting for the start message. */
function startContender() {
  const child = fork(path.join(__dirname, 'support', 'contender.js'), { env: process.env })
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve(child))
    child.once('error', reject)
  })
}

/** Races 4 processes x 5 concurrent snatchTask calls on one key; resolves how many ran in total. */
async function race(urls) {
  const key = `processes:${process.pid}:${Date.now()}`
  const children = await Promise.all(Array.from({ length: 4 }, startContender))
  const reports = children.map((child) => new Promise((resolve) => child.once('message', resolve)))
  for (const child of children) child.send({ key, attempts: 5, urls })
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
function runScript(code) {
  const child = fork('-e', [code], { execArgv: [], env: process.env, cwd: path.join(__dirname, '..') })
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
  await new Promise((resolve) => setTimeout(resolve, 500))
  expect(child.exitCode).toBeNull()
  await redisCommand(process.env.REDIS_URL, 'DEL', `snatch:${key}`)
  expect(await exited).toBe(0)
})
