'use strict'
// registerMetrics: this process's metrics in the application's own prom-client Registry, beside prom-client's default
// metrics, two lockers in one registry told apart by their label, the fleet's gauges for the one that asks, while a
// replica process runs a schedule of its own (in the fleet's gauges, not in this process's counts). prom-client's
// output is parsed strictly (every line, # HELP and # TYPE of each family, escapes, grouping, histograms), then with
// parse-prometheus-text-format, and linted by promtool where it is installed. Then which prom-client makes the
// metrics: the one of the registry, in an application with its own copy.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const parsePrometheus = require('parse-prometheus-text-format')
const client = require('prom-client')
const { createLocker } = require('../..')
const { registerMetrics } = require('redis-snatch/prometheus')
const { Replicas } = require('../support/replicas')
const { next, uniqueKey } = require('../support/util')

jest.setTimeout(60_000)

const PROMTOOL = spawnSync('promtool', ['--version']).status === 0 ? 'promtool' : null
if (PROMTOOL === null) {
  if (process.env.SNATCH_REQUIRE_PROMTOOL) throw new Error('promtool is required (SNATCH_REQUIRE_PROMTOOL) but missing')
  console.log('promtool checks skipped: no promtool (Debian: apt-get install prometheus)')
}
const withPromtool = PROMTOOL ? test : test.skip

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*'
const LABEL = '[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\\\\n]|\\\\[\\\\"n])*"'
const VALUE = '[-+]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][-+]?\\d+)?|[-+]?[Ii]nf|[Nn]a[Nn]'
const SAMPLE = new RegExp(`^(${NAME})(?:\\{((?:${LABEL})(?:,${LABEL})*)?\\})? (${VALUE})(?: -?\\d+)?$`)
const HELP = new RegExp(`^# HELP (${NAME}) (?:[^\\\\\\n]|\\\\[\\\\n])*$`)
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`)
/** The sample names of a family of each type, beside its own name. */
const SUFFIXES = { histogram: ['_bucket', '_sum', '_count'], summary: ['_sum', '_count'] }

/**
 * The text exposition format `text`, read strictly: every line a HELP, a TYPE, a sample or blank; each family's HELP
 * and TYPE once, before its samples, which come together; each series once; a histogram's `+Inf` bucket its count.
 * Throws on the first line that breaks a rule. Returns `{ types, samples, value }`: family → type; every sample
 * `{ family, name, labels, value }`; `value(name, labels)` the value of the one sample of `name` with those labels
 * (and maybe more), undefined when none.
 */
function strictParse(text) {
  const types = new Map()
  const helped = new Set()
  const series = new Map()
  const samples = []
  const done = new Set()
  let current = null
  text.split('\n').forEach((line, i) => {
    const fail = (why) => {
      throw new Error(`line ${i + 1}: ${why}: ${JSON.stringify(line)}`)
    }
    if (line === '') return
    let m
    if ((m = HELP.exec(line))) {
      if (helped.has(m[1])) fail('a second HELP')
      helped.add(m[1])
    } else if ((m = TYPE.exec(line))) {
      if (types.has(m[1])) fail('a second TYPE')
      if (!helped.has(m[1])) fail('a TYPE before its HELP')
      types.set(m[1], m[2])
    } else if ((m = SAMPLE.exec(line))) {
      const [, name, labels = '', value] = m
      const family = [name, ...['_bucket', '_sum', '_count'].filter((s) => name.endsWith(s)).map((s) => name.slice(0, -s.length))]
        .find((f) => types.has(f) && (f === name || (SUFFIXES[types.get(f)] ?? []).some((s) => f + s === name)))
      if (family === undefined) fail('a sample of no family typed before it')
      if (family !== current) {
        if (done.has(family)) fail('a sample apart from the rest of its family')
        if (current !== null) done.add(current)
        current = family
      }
      const pairs = [...labels.matchAll(new RegExp(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\\]|\\\\.)*)"`, 'g'))]
      const names = pairs.map((l) => l[1])
      if (new Set(names).size !== names.length) fail('a label twice')
      const id = `${name}{${labels}}`
      if (series.has(id)) fail('a series twice')
      const number = Number(/^[-+]?inf$/i.test(value) ? value.replace(/inf/i, 'Infinity') : value)
      series.set(id, number)
      const unescaped = (v) => v.replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c))
      samples.push({ family, name, labels: Object.fromEntries(pairs.map(([, k, v]) => [k, unescaped(v)])), value: number })
    } else {
      fail('not a line of the text format')
    }
  })
  for (const [id, count] of series) {
    const m = /^(.*)_count\{(.*)\}$/.exec(id)
    if (m === null || types.get(m[1]) !== 'histogram') continue
    const inf = [...series].find(([other]) => other.startsWith(`${m[1]}_bucket{`) && other.includes('le="+Inf"') && other.replace(/le="\+Inf",?/, '').replace(/,}$/, '}') === `${m[1]}_bucket{${m[2]}}`)
    if (inf?.[1] !== count) throw new Error(`${id}: ${count}, its +Inf bucket ${inf?.[1]}`)
  }
  const value = (name, labels = {}) => {
    const [sample, ...more] = samples.filter((m) => m.name === name && Object.entries(labels).every(([k, v]) => m.labels[k] === v))
    if (more.length > 0) throw new Error(`${name} ${JSON.stringify(labels)} names ${more.length + 1} series`)
    return sample?.value
  }
  return { types, samples, value }
}

describe('this process and the fleet, in one prom-client Registry with the default metrics', () => {
  const prefix = `${uniqueKey('prom-registry')}:`
  /** The other process's schedule, named to be escaped in a label. */
  const remote = 'remote "job" \\ with\na newline'
  const registry = new client.Registry()
  let orders
  let reports
  let replicas
  let local
  let text
  /** What registerMetrics gave, to disable. */
  const registered = []

  beforeAll(async () => {
    orders = createLocker({ url: process.env.REDIS_URL, prefix })
    reports = createLocker({ url: process.env.REDIS_URL, prefix })
    client.collectDefaultMetrics({ register: registry })
    registered.push(registerMetrics(orders, registry, { fleet: true, name: 'orders' }))
    registered.push(registerMetrics(reports, registry, { name: 'reports' }))

    // Another process runs a schedule of its own: in the fleet's gauges, not in this process's counts.
    replicas = new Replicas(path.join(__dirname, '..', 'support', 'workers', 'schedule-replica.js'))
    await replicas.start(1, { message: { name: remote, cron: '* * * * * *', prefix } })
    await replicas.next((e) => e.event === 'run', "the other process's attempt")
    local = orders.schedule('local', '* * * * * *', () => {})
    await next(local, 'run')

    await orders.withLock('stock:1', () => {})
    await orders.withLock('stock:1', () => {})
    const held = await reports.tryLock('report:1', { ttl: 30_000 })
    expect((await orders.snatchTask('report:1', () => {})).ran).toBe(false)
    expect((await orders.lock('report:1', { wait: 100 }).catch((e) => e)).code).toBe('ERR_SNATCH_TIMEOUT')
    await held.release()
    // A lease lost: the key taken away while fn holds it.
    const lost = await orders
      .withLock('stock:2', async ({ signal }) => {
        await reports.forceRelease('stock:2')
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
      }, { ttl: 1500 })
      .catch((e) => e)
    expect(lost.code).toBe('ERR_SNATCH_LOCK_LOST')
    text = await registry.metrics()
  })

  afterAll(async () => {
    // Their diagnostics_channel subscriptions are the process's: a test file after this one in the worker has none.
    for (const metrics of registered) metrics.disable()
    await local?.stop()
    await replicas?.stop({ stop: true })
    await orders?.close()
    await reports?.close()
  })

  test("prom-client's output reads strictly: HELP and TYPE of each family, escapes, grouping, histograms", () => {
    const { types } = strictParse(text)
    expect(text).toContain('schedule="remote \\"job\\" \\\\ with\\na newline"')
    expect(types.get('redis_snatch_lock_acquisitions_total')).toBe('counter')
    expect(types.get('redis_snatch_lock_wait_duration_seconds')).toBe('histogram')
    expect(types.get('redis_snatch_lock_hold_duration_seconds')).toBe('histogram')
    expect(types.get('redis_snatch_lock_held')).toBe('gauge')
    expect(types.get('redis_snatch_lock_lost_total')).toBe('counter')
    expect(types.get('redis_snatch_schedule_attempts_total')).toBe('counter')
    expect(types.get('redis_snatch_schedule_start_lag_seconds')).toBe('histogram')
    expect(types.get('redis_snatch_schedule_missed_total')).toBe('counter')
    expect(types.get('redis_snatch_schedule_health')).toBe('gauge')
    // The application's default metrics are there too.
    expect(types.get('process_cpu_user_seconds_total')).toBe('counter')
    expect(types.get('nodejs_eventloop_lag_seconds')).toBe('gauge')
    expect(() => strictParse('# HELP a x\n# TYPE a gauge\na{b="c} 1\n')).toThrow(/not a line/)
    expect(() => strictParse('a 1\n')).toThrow(/no family/)
    expect(() => strictParse('# HELP a x\n# TYPE a gauge\na 1\n# HELP b x\n# TYPE b gauge\nb 1\na 2\n')).toThrow(/apart/)
  })

  test('parse-prometheus-text-format reads the same families, and the same counters and gauges', () => {
    const { types, samples } = strictParse(text)
    const families = parsePrometheus(text)
    expect(families.map((f) => [f.name, f.type.toLowerCase()])).toEqual([...types])
    for (const family of families.filter((f) => f.type === 'COUNTER' || f.type === 'GAUGE')) {
      const ours = samples.filter((m) => m.family === family.name).map((m) => ({ labels: m.labels, value: m.value }))
      expect(family.metrics.map((m) => ({ labels: m.labels ?? {}, value: Number(m.value) }))).toEqual(ours)
    }
  })

  test("this process's acquisitions, waits, holds, losses and locks held, each locker under its label", () => {
    const { value } = strictParse(text)
    const orders = (labels) => ({ redis_snatch_locker: 'orders', ...labels })
    const acquisitions = (method, outcome, locker = 'orders') =>
      value('redis_snatch_lock_acquisitions_total', { redis_snatch_locker: locker, redis_snatch_method: method, redis_snatch_outcome: outcome })
    expect(acquisitions('withLock', 'acquired')).toBe(3)
    expect(acquisitions('snatchTask', 'busy')).toBe(1)
    expect(acquisitions('lock', 'timeout')).toBe(1)
    expect(acquisitions('tryLock', 'acquired', 'reports')).toBe(1)
    expect(acquisitions('tryLock', 'acquired')).toBeUndefined()
    expect(value('redis_snatch_lock_wait_duration_seconds_count', orders({ redis_snatch_method: 'withLock' }))).toBe(3)
    expect(value('redis_snatch_lock_hold_duration_seconds_count', orders({ redis_snatch_method: 'withLock' }))).toBe(3)
    const reports = { redis_snatch_locker: 'reports', redis_snatch_method: 'tryLock' }
    expect(value('redis_snatch_lock_hold_duration_seconds_count', reports)).toBe(1)
    expect(value('redis_snatch_lock_lost_total', orders({ redis_snatch_method: 'withLock' }))).toBe(1)
    expect(value('redis_snatch_lock_held', orders({ redis_snatch_method: 'withLock' }))).toBe(0)
    expect(value('redis_snatch_lock_held', reports)).toBe(0)
  })

  test("the attempts run here count here; the other process's schedule is only in the fleet's gauges", () => {
    const { value, samples } = strictParse(text)
    const here = { redis_snatch_locker: 'orders', redis_snatch_schedule: 'local' }
    expect(value('redis_snatch_schedule_attempts_total', { ...here, redis_snatch_ending: 'ok' })).toBeGreaterThanOrEqual(1)
    expect(value('redis_snatch_schedule_start_lag_seconds_count', here)).toBeGreaterThanOrEqual(1)
    const attempted = samples.filter((m) => m.family === 'redis_snatch_schedule_attempts_total').map((m) => m.labels.redis_snatch_schedule)
    expect(attempted).toContain('local')
    expect(attempted).not.toContain(remote)
    expect(value('redis_snatch_up', { redis_snatch_locker: 'orders' })).toBe(1)
    for (const schedule of ['local', remote]) {
      expect(value('redis_snatch_schedule_replicas', { schedule, redis_snatch_locker: 'orders' })).toBe(1)
      expect(value('redis_snatch_schedule_health', { schedule, health: 'ok', redis_snatch_locker: 'orders' })).toBe(1)
    }
  })

  test('no key label; the fleet only for the locker that asked', () => {
    const { samples } = strictParse(text)
    const ours = samples.filter((m) => m.family.startsWith('redis_snatch_'))
    expect(ours.length).toBeGreaterThan(50)
    for (const { family, labels } of ours) {
      expect(Object.keys(labels)).toContain('redis_snatch_locker')
      // Only the fleet's gauges of held locks and semaphores name a key (one series per key held, up to the limit).
      if (!/^redis_snatch_(lock_ttl_seconds|semaphore_)/.test(family)) expect(Object.keys(labels)).not.toContain('key')
      expect(Object.keys(labels)).not.toContain('redis_snatch_key')
    }
    expect(ours.filter((m) => m.family === 'redis_snatch_up').map((m) => m.labels.redis_snatch_locker)).toEqual(['orders'])
  })

  test('keyLabel: the keys waited for most as gauges with a key label, at most the core table of them per locker', async () => {
    // orders waited for 'report:1' (held by reports) and timed out, in beforeAll.
    const labelled = new client.Registry()
    const byKey = registerMetrics(orders, labelled, { keyLabel: true, name: 'orders' })
    const byPrefix = registerMetrics(orders, labelled, { keyLabel: (key) => key.split(':')[0], name: 'by-prefix' })
    const { value, types } = strictParse(await labelled.metrics())
    byKey.disable()
    byPrefix.disable()
    for (const family of ['redis_snatch_lock_contention_waits', 'redis_snatch_lock_contention_wait_seconds', 'redis_snatch_lock_contention_timeouts']) {
      expect(types.get(family)).toBe('gauge')
    }
    const of = (locker, key) => ({ redis_snatch_locker: locker, redis_snatch_key: key })
    expect(value('redis_snatch_lock_contention_waits', of('orders', 'report:1'))).toBe(1)
    expect(value('redis_snatch_lock_contention_timeouts', of('orders', 'report:1'))).toBe(1)
    expect(value('redis_snatch_lock_contention_wait_seconds', of('orders', 'report:1'))).toBeGreaterThanOrEqual(0.09)
    expect(value('redis_snatch_lock_contention_timeouts', of('by-prefix', 'report'))).toBe(1)
    expect((await labelled.metrics()).includes('redis_snatch_key')).toBe(false)
    expect(() => registerMetrics(orders, labelled, { keyLabel: 'key' })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
  })

  withPromtool('promtool reads it, and finds nothing to say of redis-snatch families', () => {
    const lint = spawnSync(PROMTOOL, ['check', 'metrics'], { input: text, encoding: 'utf8' })
    const findings = (lint.stdout + lint.stderr).split('\n').filter(Boolean)
    // prom-client's own default metrics draw lint findings (nodejs_active_handles_total: a gauge named _total).
    expect(findings.filter((line) => !/^(nodejs|process)_\w+ /.test(line))).toEqual([])
    const ours = text.split('\n\n').filter((family) => family.startsWith('# HELP redis_snatch_')).join('\n')
    const alone = spawnSync(PROMTOOL, ['check', 'metrics'], { input: `${ours}\n`, encoding: 'utf8' })
    expect({ status: alone.status, output: alone.stdout + alone.stderr }).toEqual({ status: 0, output: '' })
  })

  test('a second locker under a name taken, a registry that is none and bad options are refused with a code', () => {
    const invalid = expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' })
    expect(() => registerMetrics(reports, registry, { name: 'orders' })).toThrow(/named 'orders' already: give each locker its own name/)
    expect(() => registered.push(registerMetrics(reports, registry))).not.toThrow() // 'default' is free
    expect(() => registerMetrics(reports, registry)).toThrow(invalid)
    expect(() => registerMetrics(reports, {})).toThrow(/registry must be a prom-client Registry/)
    expect(() => registerMetrics({}, registry)).toThrow(invalid)
    expect(() => registerMetrics(reports, registry, { name: '' })).toThrow(invalid)
    expect(() => registerMetrics(reports, registry, { fleet: 'yes' })).toThrow(invalid)
    expect(() => registerMetrics(reports, registry, { flet: true })).toThrow(/did you mean 'fleet'/)
  })

  test('disable(): no more counts for that locker, whose name is free again; another registry counts on its own', async () => {
    const other = new client.Registry()
    const first = registerMetrics(reports, other, { name: 'r' })
    const count = async (registry) =>
      strictParse(await registry.metrics()).value('redis_snatch_lock_acquisitions_total', {
        redis_snatch_locker: 'r',
        redis_snatch_method: 'snatchTask',
        redis_snatch_outcome: 'acquired',
      })
    await reports.snatchTask(uniqueKey('once'), () => {})
    expect(await count(other)).toBe(1)
    first.disable()
    await reports.snatchTask(uniqueKey('twice'), () => {})
    expect(await count(other)).toBe(1)
    const again = registerMetrics(reports, other, { name: 'r' })
    await reports.snatchTask(uniqueKey('thrice'), () => {})
    expect(await count(other)).toBe(2)
    again.disable()
  })
})

describe("the prom-client the registry belongs to, in an application's process with its own copy", () => {
  const root = path.join(__dirname, '..', '..')
  const app = path.join(root, 'target', 'prom-client-app')
  const script = `
    const { Registry, Counter } = require('prom-client')
    const { createLocker } = require('redis-snatch')
    const { registerMetrics } = require('redis-snatch/prometheus')
    const registry = new Registry()
    const locker = createLocker({ url: process.env.REDIS_URL })
    registerMetrics(locker, registry)
    const made = registry.getSingleMetric('redis_snatch_lock_acquisitions_total')
    let refused
    try { registerMetrics(locker, { registerMetric() {} }, { name: 'x' }) } catch (err) { refused = err.code }
    console.log(JSON.stringify({ ours: made instanceof Counter, copy: require.resolve('prom-client'), refused }))
    locker.close()
  `

  beforeAll(() => {
    fs.rmSync(app, { recursive: true, force: true })
    fs.mkdirSync(path.join(app, 'node_modules'), { recursive: true })
    fs.writeFileSync(path.join(app, 'package.json'), '{ "private": true }')
    fs.symlinkSync(root, path.join(app, 'node_modules', 'redis-snatch'), 'dir')
    // A copy: another module instance than the one redis-snatch itself resolves (this repository's).
    fs.cpSync(path.dirname(require.resolve('prom-client/package.json')), path.join(app, 'node_modules', 'prom-client'), { recursive: true })
  })

  test.each([
    ['CommonJS, run from elsewhere (its main module resolves it)', 'main.cjs', script, '/'],
    ['an ES module, run from the application (the working directory resolves it)', 'main.mjs', `import { createRequire } from 'node:module'\nconst require = createRequire(import.meta.url)\n${script}`, app],
  ])('%s: the metrics are made by its copy', (_what, file, code, cwd) => {
    fs.writeFileSync(path.join(app, file), code)
    const run = spawnSync(process.execPath, [path.join(app, file)], { cwd, encoding: 'utf8' })
    expect(run.stderr).toBe('')
    expect(JSON.parse(run.stdout)).toEqual({
      ours: true,
      copy: path.join(app, 'node_modules', 'prom-client', 'index.js'),
      refused: 'ERR_SNATCH_INVALID_ARG',
    })
  })
})
