#!/usr/bin/env node
'use strict'

/**
 * redis-snatch's command line: an operator's view of the fleet's schedules and locks, and the controls over them.
 * Exit codes: 0 success, 1 an error at run time (Redis, or any error of the library), 2 bad usage.
 */

const fs = require('node:fs')
const http = require('node:http')
const { parseArgs } = require('node:util')
const { createLocker } = require('../index.js')
const { createDashboard } = require('../lib/dashboard')
const { createMetricsHandler } = require('../lib/prometheus')
const { LIMITS } = require('../lib/native')
const { storedSummary } = require('../lib/locker')

const USAGE =
  'usage: redis-snatch <schedules | stored [HANDLER] | check [NAME...] | history NAME | locks [MATCH] | inspect KEY | release KEY | ' +
  'trigger NAME | suspend NAME | resume NAME | dashboard | metrics> [options]'

const HELP = `${USAGE}

Commands:
  schedules         every schedule replicas registered, with its health (${LIMITS.healths.join(', ')})
  stored [HANDLER]  one page of the stored schedules (of HANDLER), with their health; --cursor C for the next
  check [NAME...]   the schedules that are not healthy (all, or those NAMEd: code schedules or stored schedule
                    ids): exit 0 when none, 1 when some (or a NAME unknown), for a probe, a CI step or a cron
                    monitor. Stored schedules count by handler (a handler with schedules overdue: due over a
                    minute and no runner took them); one failing stored schedule fails the check only when
                    NAMEd or with --stored (which reads every stored schedule)
  history NAME      schedule NAME's newest records, newest first
  locks [MATCH]     the locks held now (MATCH: a glob over the key names, default '*')
  inspect KEY       what Redis holds for lock KEY ("free" when nothing; its fence counter is the holder's
                    fence, or above it once other attempts used fences up)
  release KEY       delete lock KEY whoever holds it (its holder's signal aborts)
  trigger NAME      run schedule NAME (or stored schedule NAME) once now, on one live replica that runs it
  suspend NAME      every replica skips schedule NAME's occurrences until resume
  resume NAME       schedule NAME runs again
  dashboard         serve the dashboard (schedules, runs, locks) until stopped (Ctrl-C)
  metrics           serve the fleet's Prometheus metrics at /metrics until stopped (Ctrl-C)

Options:
  --url URL                  one Redis (default: $REDIS_URL, else redis://127.0.0.1:6379)
  --cluster URL,URL,...      Redis Cluster seed nodes
  --sentinel URL,URL,...     sentinels, with --sentinel-name NAME (the monitored master)
  --prefix P                 the lockers' key prefix (default: $SNATCH_PREFIX, else 'snatch:')
  --tls-ca FILE              PEM file of the certificate authorities to trust (rediss:// URLs)
  --tls-cert FILE            PEM file of the client certificate (mutual TLS)
  --tls-key FILE             PEM file of the client certificate's key
  --username U               ACL user when the URL names none
  --password P               password when the URL gives none (default: $REDIS_PASSWORD)
  --limit N                  at most N records (history, default ${LIMITS.defaultHistoryLimit}), locks (locks, default ${LIMITS.defaultListLimit}), or
                             schedules, locks and semaphores each (metrics, default ${LIMITS.defaultListLimit})
  --cursor C                 stored: the page after the one that gave cursor C
  --stored                   check: judge every stored schedule too (one unhealthy fails the check)
  --json                     one JSON document on stdout (fences as decimal strings, times as ISO strings)
  --port N                   the port to serve on (dashboard: default 4000; metrics: default 9464; 0: any free one)
  --host H                   the address to serve on (default 127.0.0.1: this machine only)
  --actions                  the dashboard's trigger, suspend, resume and force-release buttons (default: read-only)
  --help, -h                 this help
  --version, -v              the version of redis-snatch

Exit codes: 0 success, 1 an error from Redis or redis-snatch (check: or a schedule not healthy), 2 bad usage.`

/** @type {import('node:util').ParseArgsConfig['options']} */
const OPTIONS = {
  url: { type: 'string' },
  cluster: { type: 'string' },
  sentinel: { type: 'string' },
  'sentinel-name': { type: 'string' },
  prefix: { type: 'string' },
  'tls-ca': { type: 'string' },
  'tls-cert': { type: 'string' },
  'tls-key': { type: 'string' },
  username: { type: 'string' },
  password: { type: 'string' },
  limit: { type: 'string' },
  cursor: { type: 'string' },
  stored: { type: 'boolean' },
  json: { type: 'boolean' },
  port: { type: 'string' },
  host: { type: 'string' },
  actions: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' },
}

/** Each command's positional arguments: required ones, then optional ones (in brackets). */
const COMMANDS = {
  schedules: [],
  stored: ['[HANDLER]'],
  check: ['[NAME...]'],
  history: ['NAME'],
  locks: ['[MATCH]'],
  inspect: ['KEY'],
  release: ['KEY'],
  trigger: ['NAME'],
  suspend: ['NAME'],
  resume: ['NAME'],
  dashboard: [],
  metrics: [],
}

/** The options only the commands that serve take, and which those are. */
const SERVING_OPTIONS = {
  port: ['dashboard', 'metrics'],
  host: ['dashboard', 'metrics'],
  actions: ['dashboard'],
  cursor: ['stored'],
  stored: ['check'],
}

/** Each serving command's default port. */
const DEFAULT_PORTS = { dashboard: 4000, metrics: 9464 }

/** The commands that take --limit. */
const LIMITED = new Set(['history', 'locks', 'metrics', 'stored'])

/** A mistake in the command line: exit code 2. */
class UsageError extends Error {}

/** The secrets to keep out of stderr (the password given), set once the arguments are read. */
let secrets = []

/** `text` for stderr, with URL passwords (`//user:pass@` → `//user:***@`) and the password given masked. */
function mask(text) {
  let masked = String(text).replace(/\/\/([^:@/\s]*):[^@\s]*@/g, '//$1:***@')
  for (const secret of secrets) masked = masked.split(secret).join('***')
  return masked
}

/** The command line parsed: `{ command, args, values, limit }` (`limit` a number); throws UsageError. */
function parse(argv) {
  let parsed
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    // parseArgs' messages go on with hints over several sentences: the first says what is wrong.
    const first = err.message.split(/\.\s|\n/)[0]
    throw new UsageError(first[0].toLowerCase() + first.slice(1))
  }
  const { values, positionals } = parsed
  if (values.help) return { command: 'help', args: [], values, limit: undefined }
  if (values.version) return { command: 'version', args: [], values, limit: undefined }
  const [command, ...args] = positionals
  if (command === undefined) throw new UsageError('no command given')
  if (!Object.hasOwn(COMMANDS, command)) throw new UsageError(`unknown command '${command}'`)
  const expected = COMMANDS[command]
  const required = expected.filter((a) => !a.startsWith('['))
  const any = expected.some((a) => a.endsWith('...]'))
  if (args.length < required.length) throw new UsageError(`${command}: missing ${required[args.length]}`)
  if (!any && args.length > expected.length) {
    throw new UsageError(`${command}: unexpected argument '${args[expected.length]}'`)
  }
  const limit = values.limit === undefined ? undefined : Number(values.limit)
  if (limit !== undefined) {
    if (!LIMITED.has(command)) throw new UsageError(`${command} takes no --limit (history, locks, stored and metrics do)`)
    if (!/^\d+$/.test(String(values.limit)) || limit < 1 || limit > LIMITS.maxCount) {
      throw new UsageError(`--limit must be a positive integer, got '${values.limit}'`)
    }
  }
  for (const [option, commands] of Object.entries(SERVING_OPTIONS)) {
    if (!commands.includes(command) && values[option] !== undefined) throw new UsageError(`${command} takes no --${option}`)
  }
  if (values.port !== undefined && (!/^\d+$/.test(values.port) || Number(values.port) > 65535)) {
    throw new UsageError(`--port must be a port number, got '${values.port}'`)
  }
  const targets = ['url', 'cluster', 'sentinel'].filter((name) => values[name] !== undefined)
  if (targets.length > 1) throw new UsageError(`--${targets.join(' and --')} are exclusive`)
  if (values.sentinel !== undefined && !values['sentinel-name']) {
    throw new UsageError('--sentinel needs --sentinel-name')
  }
  if (values.sentinel === undefined && values['sentinel-name'] !== undefined) {
    throw new UsageError('--sentinel-name goes with --sentinel')
  }
  return { command, args, values, limit }
}

/** A comma-separated list of URLs, `--name`'s value. */
function urlList(name, value) {
  const urls = value.split(',').map((u) => u.trim()).filter(Boolean)
  if (urls.length === 0) throw new UsageError(`--${name} must list at least one URL`)
  return urls
}

/** The contents of PEM file `file` (option `--name`); an unreadable file is a run-time error (exit 1). */
function readPem(name, file) {
  try {
    return fs.readFileSync(file)
  } catch (err) {
    throw new Error(`cannot read --${name} ${file}: ${err.code ?? err.message}`)
  }
}

/** The LockerOptions the command line gives (REDIS_URL is the library's own default; REDIS_PASSWORD is read here). */
function lockerOptions(values) {
  const options = {}
  if (values.url !== undefined) options.url = values.url
  if (values.cluster !== undefined) options.cluster = urlList('cluster', values.cluster)
  if (values.sentinel !== undefined) {
    options.sentinel = { urls: urlList('sentinel', values.sentinel), name: values['sentinel-name'] }
  }
  if (values.prefix !== undefined) options.prefix = values.prefix
  if (values.username !== undefined) options.username = values.username
  const password = values.password ?? (process.env.REDIS_PASSWORD || undefined)
  if (password !== undefined) options.password = password
  const tls = {}
  for (const [option, name] of [['tls-ca', 'ca'], ['tls-cert', 'cert'], ['tls-key', 'key']]) {
    if (values[option] !== undefined) tls[name] = readPem(option, values[option])
  }
  if (Object.keys(tls).length > 0) options.tls = tls
  return options
}

/**
 * Where the command looked, for an empty answer: "under prefix 'p' on <the server>", the servers named by their URLs
 * without credentials.
 */
function place(options) {
  const bare = (url) => url.replace(/\/\/[^@/]*@/, '//')
  const prefix = options.prefix ?? (process.env.SNATCH_PREFIX || 'snatch:')
  let server = bare(options.url ?? (process.env.REDIS_URL || 'redis://127.0.0.1:6379'))
  if (options.cluster) server = `the cluster of ${options.cluster.map(bare).join(', ')}`
  if (options.sentinel) server = `master '${options.sentinel.name}' of the sentinels ${options.sentinel.urls.map(bare).join(', ')}`
  return `under prefix '${prefix}' on ${server}`
}

/**
 * Runs `command` with `args` (and `limit`) on `locker`, made with `options`; resolves `{ json, text, code? }`, what to
 * print in either mode and the exit code when not 0.
 */
async function run(locker, options, command, args, limit, parsedCursor, all) {
  const [name] = args
  switch (command) {
    case 'schedules': {
      const schedules = await locker.schedules()
      if (schedules.length === 0) return { json: [], text: `no schedules registered ${place(options)}` }
      return { json: schedules, text: schedulesTable(schedules) }
    }
    case 'stored': {
      const page = await locker.listSchedules({ handler: name, limit: limit ?? 100, cursor: parsedCursor })
      const json = page
      if (page.schedules.length === 0) return { json, text: `no stored schedules ${place(options)}` }
      const more = page.cursor === null ? '' : `\nmore: --cursor ${page.cursor}`
      return { json, text: `${storedTable(page.schedules)}${more}` }
    }
    case 'check':
      return check(locker, args, options, all)
    case 'history': {
      const records = await locker.history(name, { limit })
      if (records.length === 0) return { json: [], text: `no records of '${name}' ${place(options)}` }
      return { json: records, text: historyTable(records) }
    }
    case 'locks': {
      const locks = await locker.locks({ match: name, limit })
      if (locks.length === 0) return { json: [], text: `no locks held ${place(options)}` }
      return { json: locks, text: locksTable(locks) }
    }
    case 'inspect': {
      const held = await locker.inspect(name)
      if (held === null) return { json: null, text: `free: nothing held ${place(options)}` }
      const { holder, holders, ttl, fence } = held
      const rows = [['key', name], ['holder', holder ?? '-'], ['holders', holders], ['ttl', duration(ttl)]]
      // The key's fence counter: the holder's fence, or above it once other attempts used fences up.
      return { json: held, text: table([...rows, ['fence counter', fence]]) }
    }
    case 'release': {
      const released = await locker.forceRelease(name)
      return { json: { released }, text: released ? `released '${name}'` : `'${name}' was not held: nothing released` }
    }
    case 'trigger': {
      const { tick } = await locker.trigger(name)
      return { json: { tick }, text: `triggered '${name}': a manual run with tick ${localTime(tick)}` }
    }
    case 'suspend':
      await locker.suspend(name)
      return { json: { name, suspended: true }, text: `suspended '${name}'` }
    case 'resume':
      await locker.resume(name)
      return { json: { name, suspended: false }, text: `resumed '${name}'` }
  }
  throw new Error(`unhandled command ${command}`)
}

function schedulesTable(schedules) {
  const rows = schedules.map((s) => [
    s.name,
    s.cron,
    s.timezone,
    s.suspended ? 'suspended' : 'active',
    s.replicas.length,
    s.running.length,
    s.next ? when(s.next) : '-',
    s.last ? `${s.last.outcome} ${relative(s.last.started ?? s.last.tick)}` : '-',
    s.health,
  ])
  return table([['NAME', 'CRON', 'TIMEZONE', 'STATE', 'REPLICAS', 'RUNNING', 'NEXT', 'LAST', 'HEALTH'], ...rows])
}

/**
 * `check`: the code schedules (all, or those `names`) that are not healthy, with why; a name that no replica registered
 * (or whose state expired) and no stored schedule has is `unknown`. Stored schedules count by handler: one whose
 * schedules are overdue (due over a minute ago, no runner took them) is unhealthy; a stored schedule on its own only
 * when named, or with `all` (--stored: every stored schedule read, page by page). Exit code 1 when any, else 0.
 */
async function check(locker, names, options, all) {
  const schedules = await locker.schedules()
  const byName = new Map(schedules.map((s) => [s.name, s]))
  const checked = []
  for (const n of names) {
    const stored = byName.has(n) ? null : await locker.getSchedule(n).catch(() => null)
    checked.push(byName.get(n) ?? (stored ? { ...stored, name: n, stored: true } : { name: n, health: 'unknown' }))
  }
  let handlers = []
  if (names.length === 0) {
    checked.push(...schedules)
    handlers = await locker[storedSummary]().catch((err) => (err?.code === 'ERR_SNATCH_INVALID_ARG' ? [] : Promise.reject(err)))
    if (all) {
      let cursor
      do {
        const page = await locker.listSchedules({ limit: 1000, cursor })
        checked.push(...page.schedules.map((s) => ({ ...s, name: s.id, stored: true })))
        cursor = page.cursor ?? undefined
      } while (cursor !== undefined)
    }
  }
  const unhealthy = checked.filter((s) => s.health !== 'ok').map((s) => ({ name: s.name, health: s.health, why: why(s, options) }))
  for (const h of handlers.filter((h) => h.overdue > 0)) {
    const runners = h.runners === 0 ? 'no live runner' : `${h.runners} live runner${h.runners === 1 ? '' : 's'}`
    unhealthy.push({ name: `handler ${h.handler}`, health: 'overdue', why: `${h.overdue} of ${h.schedules} stored schedules overdue; ${runners}` })
  }
  const stored = handlers.reduce((n, h) => n + h.schedules, 0)
  const json = { healthy: unhealthy.length === 0, checked: checked.length, stored, handlers, unhealthy }
  if (unhealthy.length > 0) {
    return { json, code: 1, text: table([['NAME', 'HEALTH', 'WHY'], ...unhealthy.map((u) => [u.name, u.health, u.why])]) }
  }
  const storedText = handlers.length === 0 ? '' : `; ${stored} stored schedules of ${handlers.length} handlers, none overdue`
  if (checked.length === 0 && handlers.length === 0) return { json, text: `no schedules registered ${place(options)}: nothing to check` }
  return { json, text: `${checked.length === 1 ? `'${checked[0].name}' is` : `all ${checked.length} schedules are`} healthy${storedText}` }
}

/** Stored schedules, a row each. */
function storedTable(schedules) {
  const rows = schedules.map((s) => [
    s.id,
    s.handler,
    s.cron ? `${s.cron} ${s.timezone}` : s.every ? `every ${duration(s.every)}` : `at ${localTime(s.at)}`,
    s.suspended ? 'suspended' : s.finished ? 'finished' : 'active',
    s.runs,
    s.next ? when(s.next) : '-',
    s.last ? `${s.last.outcome} ${relative(s.last.started ?? s.last.tick)}` : '-',
    s.health,
  ])
  return table([['ID', 'HANDLER', 'WHEN', 'STATE', 'RUNS', 'NEXT', 'LAST', 'HEALTH'], ...rows])
}

/** Why schedule `s` (a ScheduleInfo, or `{ name, health: 'unknown' }`) has its health, in a line. */
function why(s, options) {
  const last = s.last ? `last ${s.last.outcome} ${relative(s.last.started ?? s.last.tick)}` : 'never ran'
  const success = s.lastSuccess ? `last ok ${relative(s.lastSuccess)}` : 'no ok run recorded'
  switch (s.health) {
    case 'unknown':
      return `no replica registered it ${place(options)}`
    case 'orphaned':
      return `no live replica registers it (${last})`
    case 'stuck': {
      const running = s.running.map((r) => `on ${r.instance ?? '?'} since ${relative(r.started ?? r.tick)}`).join(', ')
      return `running past its timeout or maxRuntime: ${running}`
    }
    case 'failing': {
      const error = s.last.error === undefined ? '' : `: ${s.last.error.replace(/\s+/g, ' ').trim()}`
      return `${last}${error}; ${success}`
    }
    case 'missed':
      return s.last?.outcome === 'missed'
        ? `tick ${localTime(s.last.tick)} missed (${s.last.reason}); ${success}`
        : `an occurrence passed its starting deadline with no run recorded (${last}); ${success}`
  }
  return s.health
}

function historyTable(records) {
  const rows = records.map((r) => [
    when(r.tick),
    r.attempt,
    r.why,
    r.outcome,
    r.instance ?? '-',
    r.fence ?? '-',
    r.started ? localTime(r.started) : '-',
    r.durationMs === null ? '-' : duration(r.durationMs),
    detail(r),
  ])
  return table([['TICK', 'ATTEMPT', 'WHY', 'OUTCOME', 'INSTANCE', 'FENCE', 'STARTED', 'DURATION', 'DETAIL'], ...rows])
}

/** A record's reason, retry time and error, on one line. */
function detail(r) {
  const parts = []
  if (r.reason !== undefined) parts.push(r.reason)
  if (r.retryAt !== undefined) parts.push(`retry ${relative(r.retryAt)}`)
  if (r.error !== undefined) parts.push(r.error.replace(/\s+/g, ' ').trim())
  return parts.join('; ') || '-'
}

function locksTable(locks) {
  const rows = locks.map((l) => [l.key, l.holder ?? '-', duration(l.ttl), l.fence])
  // FENCE COUNTER: the key's counter (the holder's fence, or above it once other attempts used fences up).
  return table([['KEY', 'HOLDER', 'TTL', 'FENCE COUNTER'], ...rows])
}

/** `rows` (the first a header, if any) as aligned columns, two spaces apart; the last column is not padded. */
function table(rows) {
  const cells = rows.map((row) => row.map((cell) => String(cell)))
  const widths = cells[0].map((_, i) => Math.max(...cells.map((row) => row[i].length)))
  const line = (row) => row.map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i]))).join('  ')
  return cells.map(line).join('\n')
}

const pad = (n, width = 2) => String(n).padStart(width, '0')

/** `date` in local time, 'YYYY-MM-DD HH:MM:SS' (milliseconds when not whole). */
function localTime(date) {
  const d = date
  const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`
  const ms = d.getMilliseconds() === 0 ? '' : `.${pad(d.getMilliseconds(), 3)}`
  return `${day} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}${ms}`
}

/** `date` in local time and relative to now: '2025-01-02 03:04:05 (in 12s)'. */
function when(date) {
  return `${localTime(date)} (${relative(date)})`
}

/** `date` relative to now: 'in 12s', '3m ago', 'now'. */
function relative(date) {
  const ms = date.getTime() - Date.now()
  const s = Math.round(Math.abs(ms) / 1000)
  if (s === 0) return 'now'
  let span = `${Math.floor(s / 86400)}d`
  if (s < 60) span = `${s}s`
  else if (s < 3600) span = `${Math.floor(s / 60)}m`
  else if (s < 172800) span = `${Math.floor(s / 3600)}h`
  return ms > 0 ? `in ${span}` : `${span} ago`
}

/** A span of `ms` milliseconds: '0.3ms', '850ms', '9.9s', '4m05s', '2h10m'. */
function duration(ms) {
  if (ms < 10) return `${ms.toFixed(1)}ms`
  if (ms < 1000) return `${Math.round(ms)}ms`
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`
  const s = Math.floor(ms / 1000)
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`
  return `${Math.floor(s / 3600)}h${pad(Math.floor(s / 60) % 60)}m`
}

/** JSON with bigints as decimal strings (Dates become ISO strings by their toJSON). */
function toJson(value) {
  return JSON.stringify(value, (_key, v) => (typeof v === 'bigint' ? v.toString() : v), 2)
}

/**
 * Serves `command` (dashboard, metrics) for `locker` on `--host`:`--port` until SIGINT or SIGTERM; resolves exit code 0
 * then.
 */
async function serve(locker, command, values, limit) {
  let handler
  if (command === 'dashboard') handler = createDashboard(locker, { actions: values.actions === true })
  else {
    const metrics = createMetricsHandler(locker, { limit })
    handler = (req, res) => {
      if (new URL(req.url ?? '/', 'http://metrics').pathname === '/metrics') return metrics(req, res)
      res.writeHead(404, { 'content-type': 'text/plain' })
      res.end('not found: the metrics are at /metrics')
    }
  }
  const server = http.createServer(handler)
  const host = values.host ?? '127.0.0.1'
  await new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(Number(values.port ?? DEFAULT_PORTS[command]), host, resolve)
  })
  const { port } = server.address()
  const shown = host.includes(':') ? `[${host}]` : host
  const what =
    command === 'dashboard'
      ? `dashboard on http://${shown}:${port}/ (${values.actions ? 'actions on' : 'read-only'})`
      : `metrics on http://${shown}:${port}/metrics`
  process.stdout.write(`redis-snatch ${what}; Ctrl-C stops it\n`)
  await new Promise((resolve) => {
    process.once('SIGINT', resolve)
    process.once('SIGTERM', resolve)
  })
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
  return 0
}

/** Tells what is wrong with the command line, and the usage; exit code 2. */
function usage(err) {
  process.stderr.write(`redis-snatch: ${mask(err.message)}\n${USAGE}\nRun 'redis-snatch --help' for the options.\n`)
  return 2
}

/** Runs the command line `argv`; resolves the exit code. */
async function main(argv) {
  let parsed
  try {
    parsed = parse(argv)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    return usage(err)
  }
  const { command, args, values, limit } = parsed
  if (command === 'help') {
    process.stdout.write(`${HELP}\n`)
    return 0
  }
  if (command === 'version') {
    process.stdout.write(`${require('../package.json').version}\n`)
    return 0
  }
  const password = values.password ?? process.env.REDIS_PASSWORD
  if (password) secrets = [password]
  let locker
  try {
    const options = lockerOptions(values)
    locker = createLocker(options)
    if (command === 'dashboard' || command === 'metrics') return await serve(locker, command, values, limit)
    const { json, text, code = 0 } = await run(locker, options, command, args, limit, values.cursor, values.stored === true)
    process.stdout.write(`${values.json ? toJson(json) : text}\n`)
    return code
  } catch (err) {
    if (err instanceof UsageError) return usage(err)
    const code = err?.code ? ` (${err.code})` : ''
    process.stderr.write(`redis-snatch: ${mask(err?.message ?? err)}${code}\n`)
    return 1
  } finally {
    await locker?.close().catch(() => {})
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code
  },
  (err) => {
    process.stderr.write(`redis-snatch: ${mask(err?.stack ?? err)}\n`)
    process.exitCode = 1
  },
)
