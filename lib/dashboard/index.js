'use strict'
// The dashboard: `createDashboard(locker, { actions })` is a `(req, res, next?)` handler that serves one page (HTML,
// CSS and script from ./page, no CDN) and its JSON, under whatever path it is mounted at, and the fleet's Prometheus
// metrics at `metrics` (../prometheus.js). The page polls the state every second; every open page shares one read of
// Redis per second (snapshot.js). Actions (trigger, suspend, resume, force release) exist only with `actions: true`:
// POST only, each with the page's CSRF token; without, the page has no buttons and the endpoints answer 403. The JSON
// never holds lock tokens or credentials (the locker's errors redact passwords); the page renders every name as text,
// and a Content-Security-Policy forbids inline script.

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { invalidArg } = require('../errors')
const { Locker, storedSummary } = require('../locker')

/** How many stored schedules a page of the dashboard shows. */
const STORED_PAGE = 50
const { checkType, snapshot } = require('../options')
const { createMetricsHandler } = require('../prometheus')
const { Snapshot } = require('./snapshot')

/** How old the state a page gets may be, at most (the page polls at the same pace). */
const REFRESH_MS = 1000
/** The largest action body read. */
const MAX_BODY = 4096

const HEADERS = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
}

const PAGE_DIR = path.join(__dirname, 'page')
const ASSETS = {
  '/page.css': ['text/css; charset=utf-8', fs.readFileSync(path.join(PAGE_DIR, 'page.css'))],
  '/page.js': ['text/javascript; charset=utf-8', fs.readFileSync(path.join(PAGE_DIR, 'page.js'))],
}
const HTML = fs.readFileSync(path.join(PAGE_DIR, 'index.html'), 'utf8')

/** The actions: what each does with the request's body. */
const ACTIONS = {
  '/api/trigger': (locker, { name }) => locker.trigger(name).then(({ tick }) => ({ tick: tick.getTime() })),
  '/api/suspend': (locker, { name }) => locker.suspend(name).then(() => ({})),
  '/api/resume': (locker, { name }) => locker.resume(name).then(() => ({})),
  '/api/release': (locker, { key }) => locker.forceRelease(key).then((released) => ({ released })),
}

/**
 * A handler serving the dashboard of `locker`'s deployment (its schedules, locks and connection). `options.actions`:
 * allow trigger, suspend, resume and force release from the page (default false: read-only).
 */
function createDashboard(locker, options) {
  if (!(locker instanceof Locker)) {
    throw invalidArg(TypeError, 'createDashboard needs a Locker (from createLocker)')
  }
  const o = snapshot('options', options, ['actions'])
  checkType('actions', o.actions, 'boolean')
  const actions = o.actions === true
  const csrf = crypto.randomBytes(24).toString('base64url')
  const state = new Snapshot(locker, REFRESH_MS)
  const metrics = createMetricsHandler(locker)
  const html = Buffer.from(
    HTML.replace('<!--csrf-->', actions ? `<meta name="csrf-token" content="${csrf}">` : ''),
    'utf8',
  )

  return function dashboard(req, res, next) {
    const url = new URL(req.url ?? '/', 'http://dashboard')
    const route = url.pathname
    const method = req.method ?? 'GET'
    if (route === '/' || route === '') {
      // The page's links are relative: it must be served under a path that ends with '/'.
      const mounted = new URL(req.originalUrl ?? req.url ?? '/', 'http://dashboard')
      if (!mounted.pathname.endsWith('/')) return redirect(res, `${mounted.pathname}/${mounted.search}`)
      if (method !== 'GET' && method !== 'HEAD') return send(res, 405, 'text/plain', 'method not allowed')
      return send(res, 200, 'text/html; charset=utf-8', html)
    }
    if (ASSETS[route]) return send(res, 200, ...ASSETS[route])
    if (route === '/metrics') return metrics(req, res)
    if (route === '/api/state' && method === 'GET') {
      return json(res, state.state().then((now) => ({ ...now, actions })))
    }
    if (route === '/api/stored' && method === 'GET') {
      // One page of the stored schedules, and their counts by handler (not on Redlock: none).
      const cursor = url.searchParams.get('cursor') ?? undefined
      const none = (err) => (err?.code === 'ERR_SNATCH_INVALID_ARG' ? null : Promise.reject(err))
      const page = Promise.all([
        locker.listSchedules({ limit: STORED_PAGE, cursor }).catch(none),
        locker[storedSummary]().catch(none),
      ]).then(([found, handlers]) => ({ ...(found ?? { schedules: [], cursor: null }), handlers: handlers ?? [] }))
      return json(res, page)
    }
    if (route === '/api/history' && method === 'GET') {
      const name = url.searchParams.get('name')
      if (!name) return send(res, 400, 'application/json', JSON.stringify({ error: 'name is required' }))
      return json(res, state.history(name).then((records) => ({ name, records })))
    }
    const action = ACTIONS[route]
    if (action) {
      if (!actions) return send(res, 403, 'application/json', JSON.stringify({ error: 'actions are off' }))
      if (method !== 'POST') return send(res, 405, 'application/json', JSON.stringify({ error: 'POST only' }))
      if (!sameToken(req.headers['x-csrf-token'], csrf)) {
        return send(res, 403, 'application/json', JSON.stringify({ error: 'bad or missing CSRF token' }))
      }
      return readBody(req).then(
        (body) => {
          const target = body?.name ?? body?.key
          if (typeof target !== 'string' || target === '') {
            return send(res, 400, 'application/json', JSON.stringify({ error: 'name or key is required' }))
          }
          return json(
            res,
            action(locker, body).finally(() => state.invalidate()),
          )
        },
        (err) => send(res, 400, 'application/json', JSON.stringify({ error: err.message })),
      )
    }
    if (typeof next === 'function') return next()
    return send(res, 404, 'text/plain', 'not found')
  }
}

/** Whether `given` is `expected`, compared in constant time. */
function sameToken(given, expected) {
  if (typeof given !== 'string' || given.length !== expected.length) return false
  return crypto.timingSafeEqual(Buffer.from(given), Buffer.from(expected))
}

/** A request's JSON body, at most MAX_BODY bytes. */
function readBody(req) {
  // Express with a body parser has read it already.
  if (req.body !== undefined && typeof req.body === 'object' && !Buffer.isBuffer(req.body)) return Promise.resolve(req.body)
  return new Promise((resolve, reject) => {
    const chunks = []
    let size = 0
    req.on('data', (chunk) => {
      size += chunk.length
      if (size > MAX_BODY) {
        reject(new Error('body too large'))
        req.destroy()
      } else chunks.push(chunk)
    })
    req.on('end', () => {
      try {
        resolve(JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}'))
      } catch {
        reject(new Error('the body is not JSON'))
      }
    })
    req.on('error', reject)
  })
}

function send(res, status, type, body) {
  res.writeHead(status, { ...HEADERS, 'content-type': type })
  res.end(body)
}

function redirect(res, location) {
  res.writeHead(301, { ...HEADERS, location })
  res.end()
}

/** `value` as JSON for the page: Dates as epoch ms, bigints (fences) as decimal strings. */
function toJson(value) {
  return JSON.stringify(value, function (key, v) {
    const raw = this[key]
    if (raw instanceof Date) return raw.getTime()
    return typeof v === 'bigint' ? String(v) : v
  })
}

/** Sends what `promise` resolves as JSON, or its error as a 502 (Redis) or 409 (say, no live replica). */
function json(res, promise) {
  return promise.then(
    (value) => send(res, 200, 'application/json', toJson(value)),
    (err) => {
      const status = err?.code === 'ERR_SNATCH_REDIS' || err?.code === 'ERR_SNATCH_QUORUM' ? 502 : 409
      send(res, status, 'application/json', JSON.stringify({ error: `${err?.name}: ${err?.message}`, code: err?.code }))
    },
  )
}

module.exports = { createDashboard }
