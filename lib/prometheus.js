'use strict'
// `require('redis-snatch/prometheus')`: the fleet's state as Prometheus metrics, read from Redis on each scrape (any
// process, or the CLI, tells every replica's schedules and the locks held). The text exposition format, version 0.0.4.

const { invalidArg } = require('./errors')
const { Locker, semaphores } = require('./locker')
const { checkType, snapshot } = require('./options')

/** How many schedules, locks and semaphores a scrape lists at most, by default. */
const DEFAULT_LIMIT = 1000
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
const HEALTHS = ['ok', 'failing', 'missed', 'stuck', 'orphaned']
const OUTCOMES = ['ok', 'failed', 'timeout', 'lost', 'crashed', 'interrupted', 'missed']

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
  const began = performance.now()
  const out = new Exposition()
  let read
  try {
    read = await Promise.all([locker.schedules(), locker.locks({ limit: limit + 1 }), locker[semaphores](limit + 1)])
  } catch (err) {
    out.family('redis_snatch_up', 'gauge', 'Whether Redis answered the scrape (0: see redis_snatch_scrape_error)')
    out.sample('redis_snatch_up', {}, 0)
    out.family('redis_snatch_scrape_error', 'gauge', "The error of the scrape's read of Redis, by its code")
    out.sample('redis_snatch_scrape_error', { code: err?.code ?? 'unknown' }, 1)
    return out.text()
  }
  const [allSchedules, allLocks, allSemaphores] = read
  const schedules = allSchedules.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)).slice(0, limit)
  const locks = allLocks.slice(0, limit)
  const held = allSemaphores.slice(0, limit)

  out.family('redis_snatch_up', 'gauge', 'Whether Redis answered the scrape (0: see redis_snatch_scrape_error)')
  out.sample('redis_snatch_up', {}, 1)
  scheduleMetrics(out, schedules)
  out.family('redis_snatch_locks_held', 'gauge', 'How many locks are held now (those listed: see redis_snatch_scrape_truncated)')
  out.sample('redis_snatch_locks_held', {}, locks.length)
  out.family('redis_snatch_lock_ttl_seconds', 'gauge', "Until a held lock's lease ends unless renewed, in seconds")
  for (const lock of locks) out.sample('redis_snatch_lock_ttl_seconds', { key: lock.key }, lock.ttl / 1000)
  out.family('redis_snatch_semaphore_permits_held', 'gauge', "A semaphore's permits held now")
  for (const s of held) out.sample('redis_snatch_semaphore_permits_held', { key: s.key }, s.holders)
  out.family('redis_snatch_semaphore_permits_limit', 'gauge', "A semaphore's limit, as its last acquisition gave it")
  for (const s of held) if (s.limit !== null) out.sample('redis_snatch_semaphore_permits_limit', { key: s.key }, s.limit)
  out.family('redis_snatch_scrape_truncated', 'gauge', 'Whether a list was cut at the handler\'s limit (1), by kind')
  out.sample('redis_snatch_scrape_truncated', { kind: 'schedules' }, allSchedules.length > limit ? 1 : 0)
  out.sample('redis_snatch_scrape_truncated', { kind: 'locks' }, allLocks.length > limit ? 1 : 0)
  out.sample('redis_snatch_scrape_truncated', { kind: 'semaphores' }, allSemaphores.length > limit ? 1 : 0)
  out.family('redis_snatch_scrape_duration_seconds', 'gauge', "How long the scrape's read of Redis took")
  out.sample('redis_snatch_scrape_duration_seconds', {}, (performance.now() - began) / 1000)
  return out.text()
}

/** The per-schedule families, in `out`. */
function scheduleMetrics(out, schedules) {
  const each = (name, type, help, value) => {
    out.family(name, type, help)
    for (const s of schedules) {
      const v = value(s)
      if (v !== null) out.sample(name, { schedule: s.name }, v)
    }
  }
  const seconds = (date) => (date === null ? null : date.getTime() / 1000)
  out.family('redis_snatch_schedule_health', 'gauge', `A schedule's health (1 for the one it has): ${HEALTHS.join(', ')}`)
  for (const s of schedules) {
    for (const health of HEALTHS) out.sample('redis_snatch_schedule_health', { schedule: s.name, health }, s.health === health ? 1 : 0)
  }
  each('redis_snatch_schedule_last_success_timestamp_seconds', 'gauge', 'When its newest ok attempt ended (Unix time)', (s) => seconds(s.lastSuccess))
  out.family('redis_snatch_schedule_last_outcome', 'gauge', `How its newest finished attempt ended (1 for that one): ${OUTCOMES.join(', ')}`)
  for (const s of schedules) {
    if (s.last === null) continue
    for (const outcome of OUTCOMES) {
      out.sample('redis_snatch_schedule_last_outcome', { schedule: s.name, outcome }, s.last.outcome === outcome ? 1 : 0)
    }
  }
  each('redis_snatch_schedule_running', 'gauge', 'Its attempts running now', (s) => s.running.length)
  each('redis_snatch_schedule_recent_records', 'gauge', 'How many of its newest records (up to 50) were read', (s) => s.recent.records)
  each('redis_snatch_schedule_recent_failed', 'gauge', 'Of those, how many failed, timed out, lost their lease or crashed', (s) => s.recent.failed)
  each('redis_snatch_schedule_recent_missed', 'gauge', 'Of those, how many occurrences were missed', (s) => s.recent.missed)
  each('redis_snatch_schedule_suspended', 'gauge', 'Whether it is suspended (1)', (s) => (s.suspended ? 1 : 0))
  each('redis_snatch_schedule_replicas', 'gauge', 'The live replicas that register it', (s) => s.replicas.length)
  each('redis_snatch_schedule_next_timestamp_seconds', 'gauge', 'Its next tick (Unix time)', (s) => seconds(s.next))
}

/** Exposition text in the making: families with their HELP and TYPE, then their samples. */
class Exposition {
  #lines = []

  /** Starts family `name` of `type` with `help`. */
  family(name, type, help) {
    this.#lines.push(`# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`, `# TYPE ${name} ${type}`)
  }

  /** A sample of `name` with `labels` and `value`. */
  sample(name, labels, value) {
    const pairs = Object.entries(labels).map(([label, v]) => `${label}="${escapeLabel(v)}"`)
    this.#lines.push(`${name}${pairs.length === 0 ? '' : `{${pairs.join(',')}}`} ${number(value)}`)
  }

  text() {
    return `${this.#lines.join('\n')}\n`
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

module.exports = { createMetricsHandler, metricsText }
