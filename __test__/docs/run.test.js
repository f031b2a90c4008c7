'use strict'
// The docs' examples marked `<!-- run: name -->`, run as a user would run them and checked against what their text
// says: the README's in several processes at once (replicas) against a real Redis, each as pasted into a file of the
// module system it is written for (.cjs when it calls `require`, else .mjs), with only what they take from an app (a
// report to send, an outbox, a database) made real by support/docs-world.mjs, loaded first with `node --import`; the
// testing guide's as a Jest project of its own.

const { spawn, spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { pathToFileURL } = require('node:url')
const { redisCommand } = require('../support/redis-server')
const { until } = require('../support/every-method')
const { root, pages, blocks, moduleSystem } = require('../support/doc-blocks')

jest.setTimeout(60_000)

const dir = path.join(root, 'target', 'doc-run')
const world = pathToFileURL(path.join(__dirname, '..', 'support', 'docs-world.mjs')).href
const marked = new Map(pages.flatMap(blocks).filter((block) => block.run).map((block) => [block.run, block]))

/** The example processes not yet exited: a failed test's are killed after it. */
const running = new Set()

beforeAll(() => fs.mkdirSync(dir, { recursive: true }))
afterEach(() => {
  for (const child of running) child.kill('SIGKILL')
})

/**
 * Starts `count` processes of the example `name` and lets them go together once each is ready. Returns
 * `{ children, acts(), exits }`: `acts()` reads what they did so far, `exits` resolves each one's
 * `{ code, signal, stdout, stderr }` once it exited and its output was read.
 */
async function replicas(name, count, env = {}) {
  const { code } = marked.get(name)
  const file = path.join(dir, `${name}.${moduleSystem(code) === 'commonjs' ? 'cjs' : 'mjs'}`)
  const record = path.join(dir, `${name}.jsonl`)
  fs.writeFileSync(file, code)
  fs.writeFileSync(record, '')
  const acts = () =>
    fs
      .readFileSync(record, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((text) => JSON.parse(text))
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', world, file], { env: { ...process.env, SNATCH_DOC_RECORD: record, ...env } }),
  )
  const exits = Promise.all(
    children.map((child) => {
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (data) => (stdout += data))
      child.stderr.on('data', (data) => (stderr += data))
      running.add(child)
      return new Promise((resolve) =>
        child.once('close', (code, signal) => {
          running.delete(child)
          resolve({ code, signal, stdout, stderr })
        }),
      )
    }),
  )
  await until(() => acts().filter((act) => act.act === 'ready').length === count, `${count} replicas of ${name} to start`)
  for (const child of children) child.stdin.end('go\n')
  return { children, acts, exits }
}

test('every example marked to run is run here, and every example run here is marked', () => {
  expect([...marked.keys()].sort()).toEqual(['lock', 'memory-jest', 'run-once', 'schedule'])
})

test('run once: of 3 replicas calling at once, one sends the report and the others are told so', async () => {
  await redisCommand(process.env.REDIS_URL, 'DEL', 'snatch:report:daily')
  const { acts, exits } = await replicas('run-once', 3)
  const ended = await exits
  expect(ended.map(({ code, stderr }) => ({ code, stderr }))).toEqual(Array(3).fill({ code: 0, stderr: '' }))
  expect(acts().filter((act) => act.act === 'sendReport')).toHaveLength(1)
  const said = ended.map(({ stdout }) => stdout.trim()).sort()
  expect(said).toEqual(['another replica sent it', 'another replica sent it', expect.stringMatching(/^sent, fence \d+$/)])
})

test('a schedule: 3 replicas flush each 5-second occurrence once, and exit 0 on SIGTERM', async () => {
  const { children, acts, exits } = await replicas('schedule', 3)
  const ticks = () => acts().filter((act) => act.act === 'flushOutbox').map((act) => act.tick)
  await until(() => new Set(ticks()).size >= 2, 'two occurrences to be flushed', 30_000)
  for (const child of children) child.kill('SIGTERM')
  const ended = await exits
  expect(ended.map(({ code, stderr }) => ({ code, stderr }))).toEqual(Array(3).fill({ code: 0, stderr: '' }))
  const flushed = ticks()
  expect(new Set(flushed).size).toBe(flushed.length)
  for (const tick of flushed) expect(tick % 5000).toBe(0)
})

test('a lock: 5 replicas each take one from the stock in turn, with rising fences, and none is refused', async () => {
  const stock = path.join(dir, 'stock.json')
  fs.writeFileSync(stock, JSON.stringify({ 'sku-42': { stock: 100, fence: '0' } }))
  const { acts, exits } = await replicas('lock', 5, { SNATCH_DOC_STOCK: stock })
  const ended = await exits
  expect(ended.map(({ code, stderr }) => ({ code, stderr }))).toEqual(Array(5).fill({ code: 0, stderr: '' }))
  const writes = acts().filter((act) => act.act === 'writeStock')
  expect(writes.map((write) => write.stock)).toEqual([99, 98, 97, 96, 95])
  const fences = writes.map((write) => BigInt(write.fence))
  expect(fences.every((fence, i) => i === 0 || fence > fences[i - 1])).toBe(true)
  expect(JSON.parse(fs.readFileSync(stock, 'utf8'))['sku-42'].stock).toBe(95)
})

test("testing with memory://: the guide's two files, installed as a user's, pass under Jest with no Redis", () => {
  const app = path.join(dir, 'memory-jest')
  fs.rmSync(app, { recursive: true, force: true })
  fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true })
  fs.writeFileSync(path.join(app, 'package.json'), '{ "private": true }')
  fs.symlinkSync(root, path.join(app, 'node_modules', 'redis-snatch'), 'dir')
  // The block is two files, each under a `// <file>.js` line.
  const files = marked.get('memory-jest').code.split(/^(?=\/\/ [\w.-]+\.js\b)/m)
  expect(files).toHaveLength(2)
  for (const file of files) fs.writeFileSync(path.join(app, /^\/\/ ([\w.-]+\.js)/.exec(file)[1]), file)
  const jest = require.resolve('jest/bin/jest')
  const { status, stderr } = spawnSync(process.execPath, [jest, '--ci'], {
    cwd: app,
    env: { ...process.env, REDIS_URL: 'memory://' },
    encoding: 'utf8',
  })
  expect(stderr).toMatch(/Tests:\s+1 passed, 1 total/)
  expect(status).toBe(0)
})
