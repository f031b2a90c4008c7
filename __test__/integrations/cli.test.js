'use strict'

const { execFile } = require('node:child_process')
const path = require('node:path')
const { promisify } = require('node:util')
const { createLocker } = require('../..')
const { startRedis } = require('../support/redis-server')
const { INSTANCE, next, uniqueKey } = require('../support/util')

const BIN = path.join(__dirname, '..', '..', 'bin', 'redis-snatch.js')
const run = promisify(execFile)

/**
 * Runs the command line with `args` (and, when the last is an object, that environment added); resolves
 * `{ code, stdout, stderr }`, whatever its exit code.
 */
async function cli(...args) {
  const env = typeof args.at(-1) === 'object' ? args.pop() : {}
  try {
    const { stdout, stderr } = await run(process.execPath, [BIN, ...args], { env: { ...process.env, ...env } })
    return { code: 0, stdout, stderr }
  } catch (err) {
    if (typeof err.code !== 'number') throw err
    return { code: err.code, stdout: err.stdout, stderr: err.stderr }
  }
}

/** Runs the command line with `--json`; expects exit 0 and nothing on stderr; resolves the parsed document. */
async function cliJson(...args) {
  const { code, stdout, stderr } = await cli(...args, '--json')
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
  return JSON.parse(stdout)
}

const name = uniqueKey('cli-schedule')
let locker
let task

beforeAll(async () => {
  locker = createLocker({ url: process.env.REDIS_URL })
  task = locker.schedule(name, '* * * * * *', () => {})
  await next(task, 'run')
})

afterAll(async () => {
  await task.stop()
  await locker.close()
})

test('schedules lists the schedule this process registered, in JSON and as a table', async () => {
  const schedules = await cliJson('schedules')
  const mine = schedules.find((s) => s.name === name)
  expect(mine).toMatchObject({ name, cron: '* * * * * *', timezone: 'UTC', suspended: false })
  expect(mine.replicas).toContain(INSTANCE)
  expect(new Date(mine.next).toISOString()).toBe(mine.next)

  const { code, stdout, stderr } = await cli('schedules')
  expect({ code, stderr }).toEqual({ code: 0, stderr: '' })
  expect(stdout).toMatch(/^NAME\s+CRON\s+TIMEZONE/)
  expect(stdout).toContain(name)
})

test('history gives the newest records first, with fences as decimal strings', async () => {
  const records = await cliJson('history', name, '--limit', '5')
  const ended = records.filter((r) => r.outcome !== 'running')
  expect(ended.length).toBeGreaterThanOrEqual(1)
  expect(records.length).toBeLessThanOrEqual(5)
  for (const r of ended) {
    expect(r).toMatchObject({ outcome: 'ok', instance: INSTANCE, attempt: 1 })
    expect(r.fence).toMatch(/^\d+$/)
  }
  const ticks = records.map((r) => Date.parse(r.tick))
  expect(ticks).toEqual([...ticks].sort((a, b) => b - a))

  const { code, stdout } = await cli('history', name)
  expect(code).toBe(0)
  expect(stdout).toMatch(/^TICK\s+ATTEMPT\s+WHY\s+OUTCOME/)
  expect(stdout).toContain(' ok ')
})

test('locks shows a held lock, its holder and fence; MATCH filters', async () => {
  const base = uniqueKey('cli-lock')
  const lock = await locker.tryLock(`${base}:a`, { ttl: 10000 })
  const other = await locker.tryLock(`${base}:b`, { ttl: 10000 })
  const unrelated = await locker.tryLock(uniqueKey('cli-other'), { ttl: 10000 })
  try {
    const all = await cliJson('locks', '--limit', '100000')
    const held = all.find((l) => l.key === lock.key)
    expect(held).toMatchObject({ key: lock.key, holder: INSTANCE })
    // The key's fence counter, as the column says: above the holder's own fence once `other` took one after it.
    expect(BigInt(held.fence)).toBeGreaterThanOrEqual(other.fence)
    expect(other.fence).toBeGreaterThan(lock.fence)
    expect(held.ttl).toBeGreaterThan(0)
    expect(held.ttl).toBeLessThanOrEqual(10000)

    const matched = await cliJson('locks', `${base}:*`)
    expect(matched.map((l) => l.key).sort()).toEqual([lock.key, other.key])

    const { code, stdout } = await cli('locks', `${base}:*`)
    expect(code).toBe(0)
    expect(stdout).toMatch(/^KEY\s+HOLDER\s+TTL\s+FENCE COUNTER$/m)
    expect(stdout).toContain(lock.key)
    const row = stdout.split('\n').find((line) => line.startsWith(lock.key))
    expect(BigInt(row.split(/\s+/)[3])).toBeGreaterThanOrEqual(lock.fence)
    expect(stdout).not.toContain(unrelated.key)
  } finally {
    await Promise.all([lock, other, unrelated].map((l) => l.release()))
  }
})

test('inspect shows a held key; release frees it; a second release says nothing was held', async () => {
  const key = uniqueKey('cli-release')
  const lock = await locker.tryLock(key, { ttl: 10000 })
  const inspected = await cliJson('inspect', key)
  expect(inspected).toMatchObject({ holder: INSTANCE, holders: 1 })
  expect(BigInt(inspected.fence)).toBeGreaterThanOrEqual(lock.fence) // the prefix's counter: the holder's fence or above
  expect(inspected.ttl).toBeGreaterThan(0)
  const text = await cli('inspect', key)
  expect(text.code).toBe(0)
  expect(text.stdout).toContain(INSTANCE)
  expect(BigInt(/^fence counter\s+(\d+)$/m.exec(text.stdout)[1])).toBeGreaterThanOrEqual(lock.fence)

  const released = await cli('release', key)
  expect(released.code).toBe(0)
  expect(released.stdout).toMatch(/released/)
  await expect(lock.release()).resolves.toBe(false)
  expect(await cliJson('inspect', key)).toBeNull()
  expect((await cli('inspect', key)).stdout.trim()).toBe(`free: nothing held under prefix 'snatch:' on ${process.env.REDIS_URL}`)

  const again = await cli('release', key)
  expect(again.code).toBe(0)
  expect(again.stdout).toMatch(/not held/)
  expect(await cliJson('release', key)).toEqual({ released: false })
})

test('suspend skips the occurrences until resume; trigger runs the schedule now, here', async () => {
  const skipped = next(task, 'skip', (s) => s.reason === 'suspended')
  expect(await cliJson('suspend', name)).toEqual({ name, suspended: true })
  try {
    await skipped
    const [mine] = (await cliJson('schedules')).filter((s) => s.name === name)
    expect(mine.suspended).toBe(true)
  } finally {
    // Listened for before resuming: while suspended, no occurrence runs.
    const resumedRun = next(task, 'run')
    const resumed = await cli('resume', name)
    expect(resumed).toMatchObject({ code: 0, stdout: `resumed '${name}'\n` })
    await resumedRun
  }

  const manual = next(task, 'run', (r) => r.why === 'manual')
  const { tick } = await cliJson('trigger', name)
  const ran = await manual
  expect(ran.tick.toISOString()).toBe(tick)
})

test('trigger of a schedule no replica registered exits 1 and says so', async () => {
  const missing = uniqueKey('cli-nobody')
  const { code, stdout, stderr } = await cli('trigger', missing)
  expect(code).toBe(1)
  expect(stdout).toBe('')
  expect(stderr).toContain(missing)
  expect(stderr).toContain('ERR_SNATCH_NO_REPLICA')
})

test('a dead server exits 1 with a message, and never prints the password', async () => {
  const server = await startRedis()
  await server.kill()
  const secret = 's3cret-value'
  for (const args of [
    ['schedules', '--url', server.url, '--password', secret],
    ['locks', '--url', `redis://snatch:${secret}@127.0.0.1:${server.port}`, '--json'],
  ]) {
    const { code, stdout, stderr } = await cli(...args)
    expect(code).toBe(1)
    expect(stdout).toBe('')
    expect(stderr).toMatch(/ERR_SNATCH_REDIS/)
    expect(stdout + stderr).not.toContain(secret)
  }
})

test.each([
  ['an unknown command', ['frob']],
  ['no command', []],
  ['a missing NAME', ['history']],
  ['an extra argument', ['inspect', 'a', 'b']],
  ['an unknown option', ['schedules', '--frob']],
  ['a --limit that is not a number', ['history', 'x', '--limit', 'abc']],
  ['a --limit of 0', ['locks', '--limit', '0']],
])('%s exits 2 with a usage line', async (_what, args) => {
  const { code, stdout, stderr } = await cli(...args)
  expect(code).toBe(2)
  expect(stdout).toBe('')
  expect(stderr).toMatch(/^usage: redis-snatch /m)
})

test('--help prints the usage and exits 0', async () => {
  const { code, stdout } = await cli('--help')
  expect(code).toBe(0)
  expect(stdout).toMatch(/^usage: redis-snatch /)
  expect(stdout).toContain('--sentinel-name')
})

test.each(['--version', '-v', 'schedules --version'])('%s prints the version of the package and exits 0', async (line) => {
  const { code, stdout, stderr } = await cli(...line.split(' '))
  expect({ code, stdout, stderr }).toEqual({ code: 0, stdout: `${require('../../package.json').version}\n`, stderr: '' })
})

test('an empty answer says where it looked: the prefix and the server, without credentials', async () => {
  const prefix = `${uniqueKey('empty')}:`
  const local = (await cli('schedules', '--prefix', prefix)).stdout.trim()
  expect(local).toBe(`no schedules registered under prefix '${prefix}' on ${process.env.REDIS_URL}`)
  expect((await cli('locks', '--prefix', prefix)).stdout.trim()).toBe(`no locks held under prefix '${prefix}' on ${process.env.REDIS_URL}`)
  expect((await cli('history', 'none', '--prefix', prefix)).stdout.trim()).toMatch(/^no records of 'none' under prefix /)
  const server = await startRedis({ args: ['--requirepass', 'cli-secret-8e1'], password: 'cli-secret-8e1' })
  try {
    const { code, stdout } = await cli('schedules', '--url', `redis://:cli-secret-8e1@127.0.0.1:${server.port}`)
    expect({ code, stdout: stdout.trim() }).toEqual({ code: 0, stdout: `no schedules registered under prefix 'snatch:' on redis://127.0.0.1:${server.port}` })
  } finally {
    await server.stop()
  }
})

test('SNATCH_PREFIX is the prefix of the command line and of the library when none is given', async () => {
  const prefix = `${uniqueKey('env-prefix')}:`
  const key = uniqueKey('held')
  process.env.SNATCH_PREFIX = prefix
  let l
  try {
    l = createLocker({ url: process.env.REDIS_URL })
  } finally {
    delete process.env.SNATCH_PREFIX
  }
  const lock = await l.tryLock(key)
  try {
    const listed = JSON.parse((await cli('locks', '--json', { SNATCH_PREFIX: prefix })).stdout)
    expect(listed.map((held) => held.key)).toEqual([key])
    expect(JSON.parse((await cli('locks', '--json')).stdout).map((held) => held.key)).not.toContain(key)
  } finally {
    await lock.release()
    await l.close()
  }
})

test('stored lists the stored schedules in pages; check judges them by handler unless --stored or named', async () => {
  const prefix = `${uniqueKey('cli-stored')}:`
  const admin = createLocker({ url: process.env.REDIS_URL, prefix })
  try {
    for (let n = 0; n < 3; n++) await admin.upsertSchedule(`user:${n}`, { handler: 'digest', cron: '0 8 * * *', timezone: 'Asia/Tokyo' })
    const first = await cliJson('stored', 'digest', '--limit', '2', '--prefix', prefix)
    expect(first.schedules).toHaveLength(2)
    const rest = await cliJson('stored', 'digest', '--cursor', first.cursor, '--prefix', prefix)
    expect([...first.schedules, ...rest.schedules].map((s) => s.id).sort()).toEqual(['user:0', 'user:1', 'user:2'])
    const table = await cli('stored', '--prefix', prefix)
    expect(table.stdout).toMatch(/^ID\s+HANDLER\s+WHEN/)
    // No runner: each stored schedule is orphaned, but the fleet's probe judges handlers (none overdue): healthy.
    const fleet = await cliJson('check', '--prefix', prefix)
    expect(fleet).toMatchObject({ healthy: true, stored: 3, handlers: [{ handler: 'digest', schedules: 3, overdue: 0, runners: 0 }] })
    const each = await cli('check', '--stored', '--prefix', prefix, '--json')
    expect(each.code).toBe(1)
    expect(JSON.parse(each.stdout).unhealthy.map((u) => [u.name, u.health])).toContainEqual(['user:0', 'orphaned'])
    expect((await cli('check', 'user:1', '--prefix', prefix)).code).toBe(1)
    // Overdue: a one-off due over a minute ago that no runner took fails the fleet's probe.
    await admin.upsertSchedule('late', { handler: 'cleanup', at: Date.now() - 61_000, startingDeadline: 3_600_000 })
    const overdue = await cli('check', '--prefix', prefix, '--json')
    expect(overdue.code).toBe(1)
    expect(JSON.parse(overdue.stdout).unhealthy).toEqual([
      { name: 'handler cleanup', health: 'overdue', why: '1 of 1 stored schedules overdue; no live runner' },
    ])
    expect((await cli('suspend', 'user:2', '--prefix', prefix)).code).toBe(0)
    expect((await admin.getSchedule('user:2')).suspended).toBe(true)
    expect((await cli('trigger', 'user:2', '--prefix', prefix)).code).toBe(1)
  } finally {
    await admin.close()
  }
})
