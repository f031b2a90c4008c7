'use strict'
// `require('redis-snatch/prometheus')`: the fleet's state as Prometheus metrics, read from Redis on each scrape (any
// process, or the CLI, tells every replica's schedules and the locks held), in the text exposition format, version
// 0.0.4; and, in the application's own prom-client Registry, this process's metrics (lib/call-metrics.js) with the
// fleet's gauges if asked.

const { createRequire } = require('node:module')
const path = require('node:path')
const { CONTENTION, METRICS, contentionByLabel, countCalls, labelSets } = require('./call-metrics')
const { invalidArg } = require('./errors')
const { Locker, semaphores, storedSummary } = require('./locker')
const { LIMITS } = require('./native')
const { checkType, snapshot } = require('./options')

/** How many schedules, locks and semaphores a scrape lists at most, by default: as locks() does. */
const DEFAULT_LIMIT = LIMITS.defaultListLimit
/** A schedule's healths, and how an attempt can end (the core's names). */
const { healths: HEALTHS, outcomes: OUTCOMES } = LIMITS
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'

/** The fleet's families, all gauges, in the order a scrape gives them: name → [help, label names]. */
const FLEET = {
  redis_snatch_up: ['Whether Redis answered the scrape (0: see redis_snatch_scrape_error)', []],
  redis_snatch_scrape_error: ["The error of the scrape's read of Redis, by its code", ['code']],
  redis_snatch_schedule_health: [`A schedule's health (1 for the one it has): ${HEALTHS.join(', ')}`, ['schedule', 'health']],
  redis_snatch_schedule_last_success_timestamp_seconds: ['When its newest ok attempt ended (Unix time)', ['schedule']],
  redis_snatch_schedule_last_outcome: [
    `How its newest finished attempt ended (1 for that one): ${OUTCOMES.join(', ')}`,
    ['schedule', 'outcome'],
  ],
  redis_snatch_schedule_running: ['Its attempts running now', ['schedule']],
  redis_snatch_schedule_recent_records: ['How many of its newest records (up to 50) were read', ['schedule']],
  redis_snatch_schedule_recent_failed: ['Of those, how many failed, timed out, lost their lease or crashed', ['schedule']],
  redis_snatch_schedule_recent_missed: ['Of those, how many occurrences were missed', ['schedule']],
  redis_snatch_schedule_suspended: ['Whether it is suspended (1)', ['schedule']],
  redis_snatch_schedule_replicas: ['The live replicas that register it', ['schedule']],
  redis_snatch_schedule_next_timestamp_seconds: ['Its next tick (Unix time)', ['schedule']],
  redis_snatch_stored_schedules: ['How many stored schedules a handler has (one series per handler, none per schedule)', ['handler']],
  redis_snatch_stored_overdue: ["Of those, how many were due over a minute ago and no runner took them", ['handler']],
  redis_snatch_stored_runners: ['The live replicas that run the handler', ['handler']],
  redis_snatch_locks_held: ['How many locks are held now (those listed: see redis_snatch_scrape_truncated)', []],
  redis_snatch_lock_ttl_seconds: ["Until a held lock's lease ends unless renewed, in seconds", ['key']],
  redis_snatch_semaphore_permits_held: ["A semaphore's permits held now", ['key']],
  redis_snatch_semaphore_permits_limit: ["A semaphore's limit, as its last acquisition gave it", ['key']],
  redis_snatch_scrape_truncated: ["Whether a list was cut at the handler's limit (1), by kind", ['kind']],
  redis_snatch_scrape_duration_seconds: ["How long the scrape's read of Redis took", []],
}

/**
 * A `(req, res, next?)` handler (node:http, Express, Connect) answering GET and HEAD with the metrics of `locker`'s
 * deployment: per schedule its health, last success, last outcome, running attempts, recent failed and missed counts,
 * suspension, live replicas and next tick; the locks held and the semaphores' permits. `options.limit` caps each list
 * (default 1000); `redis_snatch_scrape_truncated` says when it cut one. A Redis error gives `redis_snatch_up 0`.
 */
function createMetricsHandler(locker, options) {
  if (!(locker instanceof Locker)) {
    throw invalidArg(TypeError, 'createMetricsHandler needs a Locker (from createLocker)')
  }
  const { limit = DEFAULT_LIMIT } = snapshot('options', options, ['limit'])
  checkType('limit', limit, 'number')
  if (!(Number.isSafeInteger(limit) && limit > 0 && limit <= 100_000)) {
    throw invalidArg(RangeError, `limit must be an integer from 1 to 100000, got ${limit}`)
  }
  /** The scrape under way: concurrent scrapes share its read of Redis. */
  let reading = null
  const scrape = () => {
    reading ??= metricsText(locker, limit).finally(() => {
      reading = null
    })
    return reading
  }
  return function metrics(req, res) {
    const method = req.method ?? 'GET'
    if (method !== 'GET' && method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' })
      res.end('method not allowed')
      return
    }
    scrape().then((text) => {
      res.writeHead(200, { 'content-type': CONTENT_TYPE, 'cache-control': 'no-store' })
      res.end(method === 'HEAD' ? undefined : text)
    })
  }
}

/** The metrics of `locker`'s deployment as exposition text, each list cut at `limit`; never rejects. */
async function metricsText(locker, limit) {
  const lines = []
  for (const [name, samples] of await fleetFamilies(locker, limit)) {
    lines.push(`# HELP ${name} ${FLEET[name][0].replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} gauge`)
    for (const [labels, value] of samples) {
      const pairs = Object.entries(labels).map(([label, v]) => `${label}="${escapeLabel(v)}"`)
      lines.push(`${name}${pairs.length === 0 ? '' : `{${pairs.join(',')}}`} ${number(value)}`)
    }
  }
  return `${lines.join('\n')}\n`
}

/**
 * The fleet's families as `locker`'s deployment tells them, each list cut at `limit`: name (of FLEET) → its samples,
 * `[labels, value]`; `redis_snatch_up` 0 and the error's code when Redis could not be read. Never rejects.
 */
async function fleetFamilies(locker, limit) {
  const began = performance.now()
  const out = new Families()
  let read
  try {
    read = await Promise.all([
      locker.schedules(),
      locker.locks({ limit: limit + 1 }),
      locker[semaphores](limit + 1),
      // Not on Redlock, which has no stored schedules.
      locker[storedSummary]().catch((err) => (err?.code === 'ERR_SNATCH_INVALID_ARG' ? [] : Promise.reject(err))),
    ])
  } catch (err) {
    out.family('redis_snatch_up')
    out.sample('redis_snatch_up', {}, 0)
    out.family('redis_snatch_scrape_error')
    out.sample('redis_snatch_scrape_error', { code: err?.code ?? 'unknown' }, 1)
    return out.families
  }
  const [allSchedules, allLocks, allSemaphores, handlers] = read
  const schedules = allSchedules.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, limit)
  const locks = allLocks.slice(0, limit)
  const held = allSemaphores.slice(0, limit)

  out.family('redis_snatch_up')
  out.sample('redis_snatch_up', {}, 1)
  scheduleMetrics(out, schedules)
  for (const [name, field] of [['schedules', 'schedules'], ['overdue', 'overdue'], ['runners', 'runners']]) {
    out.family(`redis_snatch_stored_${name}`)
    for (const h of handlers.slice(0, limit)) out.sample(`redis_snatch_stored_${name}`, { handler: h.handler }, h[field])
  }
  out.family('redis_snatch_locks_held')
  out.sample('redis_snatch_locks_held', {}, locks.length)
  out.family('redis_snatch_lock_ttl_seconds')
  for (const lock of locks) out.sample('redis_snatch_lock_ttl_seconds', { key: lock.key }, lock.ttl / 1000)
  out.family('redis_snatch_semaphore_permits_held')
  for (const s of held) out.sample('redis_snatch_semaphore_permits_held', { key: s.key }, s.holders)
  out.family('redis_snatch_semaphore_permits_limit')
  for (const s of held) if (s.limit !== null) out.sample('redis_snatch_semaphore_permits_limit', { key: s.key }, s.limit)
  out.family('redis_snatch_scrape_truncated')
  out.sample('redis_snatch_scrape_truncated', { kind: 'schedules' }, allSchedules.length > limit ? 1 : 0)
  out.sample('redis_snatch_scrape_truncated', { kind: 'locks' }, allLocks.length > limit ? 1 : 0)
  out.sample('redis_snatch_scrape_truncated', { kind: 'semaphores' }, allSemaphores.length > limit ? 1 : 0)
  out.family('redis_snatch_scrape_duration_seconds')
  out.sample('redis_snatch_scrape_duration_seconds', {}, (performance.now() - began) / 1000)
  return out.families
}

/** The per-schedule families, in `out`. */
function scheduleMetrics(out, schedules) {
  const each = (name, value) => {
    out.family(name)
    for (const s of schedules) {
      const v = value(s)
      if (v !== null) out.sample(name, { schedule: s.name }, v)
    }
  }
  const seconds = (date) => (date === null ? null : date.getTime() / 1000)
  out.family('redis_snatch_schedule_health')
  for (const s of schedules) {
    for (const health of HEALTHS) out.sample('redis_snatch_schedule_health', { schedule: s.name, health }, s.health === health ? 1 : 0)
  }
  each('redis_snatch_schedule_last_success_timestamp_seconds', (s) => seconds(s.lastSuccess))
  out.family('redis_snatch_schedule_last_outcome')
  for (const s of schedules) {
    if (s.last === null) continue
    for (const outcome of OUTCOMES) {
      out.sample('redis_snatch_schedule_last_outcome', { schedule: s.name, outcome }, s.last.outcome === outcome ? 1 : 0)
    }
  }
  each('redis_snatch_schedule_running', (s) => s.running.length)
  each('redis_snatch_schedule_recent_records', (s) => s.recent.records)
  each('redis_snatch_schedule_recent_failed', (s) => s.recent.failed)
  each('redis_snatch_schedule_recent_missed', (s) => s.recent.missed)
  each('redis_snatch_schedule_suspended', (s) => (s.suspended ? 1 : 0))
  each('redis_snatch_schedule_replicas', (s) => s.replicas.length)
  each('redis_snatch_schedule_next_timestamp_seconds', (s) => seconds(s.next))
}

/** The fleet's families in the making: name → samples (`[labels, value]`), in the order they were started. */
class Families {
  families = new Map()

  /** Starts family `name` (of FLEET). */
  family(name) {
    this.families.set(name, [])
  }

  /** A sample of `name` with `labels` and `value`. */
  sample(name, labels, value) {
    this.families.get(name).push([labels, value])
  }
}

/** A label value escaped: backslash, double quote and line feed. */
function escapeLabel(value) {
  return String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')
}

/** A sample value as Prometheus writes it. */
function number(value) {
  if (Number.isNaN(value)) return 'NaN'
  if (value === Infinity) return '+Inf'
  if (value === -Infinity) return '-Inf'
  return String(value)
}

/** The label that tells the lockers of one registry apart, on every series registerMetrics puts there. */
const LOCKER_LABEL = 'redis_snatch_locker'
/** The buckets of the duration histograms, in seconds: from a direct acquisition (under 1 ms) to a long job. */
const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300]
/** Each Registry's metrics from registerMetrics (see `inRegistry`). */
const registries = new WeakMap()

/**
 * Puts this process's metrics of `locker` (its acquisitions, waits, holds, locks held, losses, scheduled attempts,
 * start lags, missed occurrences) into `registry`, a prom-client Registry of the application's, named as
 * OpenTelemetry's Prometheus exporter names redis-snatch/otel's; with `fleet: true` also the fleet's gauges
 * createMetricsHandler serves, read from Redis on each collection. Every series has the label `redis_snatch_locker`
 * (`name`, default 'default'), one per locker of the registry. `keyLabel` (`true`, or a function of the key giving
 * the label; default `false`) adds the keys waited for most (`locker.contention()`) as gauges with the label
 * `redis_snatch_key`: at most LIMITS.contentionKeys keys per locker. `disable()` stops counting (the counts stay) and
 * takes the locker's fleet and contention gauges away.
 */
function registerMetrics(locker, registry, options) {
  if (!(locker instanceof Locker)) throw invalidArg(TypeError, 'registerMetrics needs a Locker (from createLocker)')
  const { fleet = false, name = 'default', keyLabel = false } = snapshot('options', options, ['fleet', 'name', 'keyLabel'])
  if (typeof keyLabel !== 'boolean' && typeof keyLabel !== 'function') {
    throw invalidArg(TypeError, 'keyLabel must be a boolean or a function of the key')
  }
  checkType('fleet', fleet, 'boolean')
  checkType('name', name, 'string')
  if (name === '') throw invalidArg(TypeError, 'name must be a non-empty string')
  const metrics = inRegistry(promClientOf(registry), registry)
  if (metrics.lockers.has(name)) {
    throw invalidArg(TypeError, `this registry has the metrics of a locker named '${name}' already: give each locker its own name`)
  }
  const series = labelSets((metric, values) => {
    const labels = { [LOCKER_LABEL]: name }
    METRICS[metric].attributes.forEach((attribute, i) => (labels[`redis_snatch_${attribute}`] = values[i]))
    return labels
  })
  const uncount = countCalls(locker, (metric, value, values) => {
    const instrument = metrics.process[metric]
    if (METRICS[metric].instrument === 'histogram') instrument.observe(series(metric, values), value)
    else instrument.inc(series(metric, values), value)
  })
  const keyOf = keyLabel === true ? (key) => key : keyLabel || null
  const entry = { locker, fleet, uncount, keyOf }
  metrics.lockers.set(name, entry)
  if (fleet) metrics.fleet ??= fleetGauges(metrics, registry)
  if (keyOf !== null) metrics.contention ??= contentionGauges(metrics, registry)
  return {
    /** Stops counting this locker's calls (its series keep their values) and takes its fleet gauges away. */
    disable() {
      if (metrics.lockers.get(name) !== entry) return
      metrics.lockers.delete(name)
      uncount()
    },
  }
}

/**
 * The prom-client module whose Registry `registry` is: the one the application resolves (from redis-snatch's place,
 * where a package manager puts the application's peer dependency, from the application's main module, or from the
 * working directory). Throws MODULE_NOT_FOUND when there is none, ERR_SNATCH_INVALID_ARG when `registry` is not a
 * Registry of one of them.
 */
function promClientOf(registry) {
  const places = [__filename, require.main?.filename, path.join(process.cwd(), 'package.json')]
  let found = false
  for (const place of places) {
    if (place === undefined) continue
    let client
    try {
      client = place === __filename ? require('prom-client') : createRequire(place)('prom-client')
    } catch (err) {
      if (err?.code === 'MODULE_NOT_FOUND') continue
      throw err
    }
    found = true
    if (registry instanceof client.Registry) return client
  }
  if (!found) {
    const err = new Error('registerMetrics of redis-snatch/prometheus needs prom-client (the registry is its): npm install prom-client')
    err.code = 'MODULE_NOT_FOUND'
    throw err
  }
  throw invalidArg(TypeError, "registry must be a prom-client Registry (new Registry(), or prom-client's register)")
}

/**
 * The metrics registerMetrics keeps in `registry` (made by `client`, on first use, or again once the registry was
 * cleared): `process`, this process's by the ids of lib/call-metrics.js's METRICS; `fleet`, the fleet's gauges once a
 * locker wants them; `contention`, the contention gauges once a locker has a `keyLabel`; `lockers`, name → `{ locker,
 * fleet, uncount, keyOf }`.
 */
function inRegistry(client, registry) {
  const known = registries.get(registry)
  if (known !== undefined && registry.getSingleMetric(known.process.acquisitions.name) === known.process.acquisitions) {
    return known
  }
  const own = {}
  for (const [id, { name, instrument, unit, description, attributes }] of Object.entries(METRICS)) {
    const config = {
      name: prometheusName(name, instrument, unit),
      help: description,
      labelNames: [LOCKER_LABEL, ...attributes.map((attribute) => `redis_snatch_${attribute}`)],
      registers: [registry],
    }
    if (instrument === 'counter') own[id] = new client.Counter(config)
    else if (instrument === 'histogram') own[id] = new client.Histogram({ ...config, buckets: BUCKETS })
    else own[id] = new client.Gauge(config)
  }
  const metrics = { client, process: own, fleet: undefined, contention: undefined, lockers: new Map() }
  registries.set(registry, metrics)
  return metrics
}

/** A metric's Prometheus name, as OpenTelemetry's Prometheus exporter writes it: `_` for `.`, `_seconds`, `_total`. */
function prometheusName(name, instrument, unit) {
  return `${name.replace(/\./g, '_')}${unit === 's' ? '_seconds' : ''}${instrument === 'counter' ? '_total' : ''}`
}

/**
 * The contention gauges (lib/call-metrics.js's CONTENTION) in `registry`, each filled on collection from the core's
 * table of every locker of `metrics` with a `keyOf`, by its name and the key's label.
 */
function contentionGauges(metrics, registry) {
  const gauges = {}
  for (const [id, { name, unit, description }] of Object.entries(CONTENTION)) {
    gauges[id] = new metrics.client.Gauge({
      name: prometheusName(name, 'gauge', unit),
      help: description,
      labelNames: [LOCKER_LABEL, 'redis_snatch_key'],
      registers: [registry],
      collect() {
        this.reset()
        for (const [locker, entry] of metrics.lockers) {
          if (entry.keyOf === null) continue
          for (const [key, sum] of contentionByLabel(entry.locker, entry.keyOf)) {
            this.set({ [LOCKER_LABEL]: locker, redis_snatch_key: key }, id === 'waitMs' ? sum.waitMs / 1000 : sum[id])
          }
        }
      },
    })
  }
  return gauges
}

/**
 * The fleet's gauges in `registry`, each filled on collection from one read of Redis per locker of `metrics` that
 * wants them, shared by the gauges of one collection.
 */
function fleetGauges(metrics, registry) {
  /** The read of the collection under way: [[name, families]], forgotten once that collection is over. */
  let reading = null
  const readAll = () => {
    reading ??= Promise.all(
      [...metrics.lockers].filter(([, entry]) => entry.fleet).map(async ([name, { locker }]) => [name, await fleetFamilies(locker, DEFAULT_LIMIT)]),
    ).finally(() => setImmediate(() => (reading = null)))
    return reading
  }
  return Object.entries(FLEET).map(
    ([family, [help, labelNames]]) =>
      new metrics.client.Gauge({
        name: family,
        help,
        labelNames: [...labelNames, LOCKER_LABEL],
        registers: [registry],
        async collect() {
          const read = await readAll()
          this.reset()
          for (const [name, families] of read) {
            for (const [labels, value] of families.get(family) ?? []) this.set({ ...labels, [LOCKER_LABEL]: name }, value)
          }
        },
      }),
  )
}

module.exports = { createMetricsHandler, metricsText, registerMetrics }
