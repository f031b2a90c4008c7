'use strict'
// redis-snatch/idempotency: the HTTP `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header) for
// Express and Fastify, on shared results: the first request with a key runs the handler under the key's lock and its
// response is stored; a duplicate while it runs gets 409, a later one the stored response, byte for byte, marked
// `Idempotent-Replayed: true` (422 when its request differs).

const crypto = require('node:crypto')
const { Locker, sharedRun } = require('./locker')
const { invalidArg } = require('./errors')
const { LIMITS } = require('./native')
const { checkType, lockInit, positiveOption, snapshot } = require('./options')

const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000
/** The longest key accepted, in characters. */
const MAX_KEY_LENGTH = 255
/** The header a replayed response carries (Stripe's name, which clients know), with the value 'true'. */
const REPLAYED_HEADER = 'Idempotent-Replayed'
/** Response headers not stored: of the connection, or of the one response. */
const UNSTORED_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'date', 'set-cookie'])

/** Checks the options; the settings. */
function settingsOf(options) {
  const o = snapshot('options', options ?? {}, ['header', 'required', 'ttl', 'scope', 'fingerprint', 'maxBytes'])
  checkType('header', o.header, 'string')
  checkType('required', o.required, 'boolean')
  checkType('scope', o.scope, 'function')
  checkType('fingerprint', o.fingerprint, 'function')
  return {
    header: (o.header ?? 'Idempotency-Key').toLowerCase(),
    required: o.required ?? false,
    ttl: positiveOption('ttl', o.ttl, DEFAULT_TTL_MS),
    scope: o.scope ?? (() => ''),
    fingerprint: o.fingerprint ?? defaultFingerprint,
    maxBytes: positiveOption('maxBytes', o.maxBytes, LIMITS.defaultMaxResultBytes),
  }
}

/** The default fingerprint of a request: a hash of its method, URL and body. */
function defaultFingerprint(req) {
  const body = req.body
  const bytes = body === undefined || body === null ? '' : Buffer.isBuffer(body) || typeof body === 'string' ? body : JSON.stringify(body)
  return crypto.createHash('sha256').update(`${req.method} ${req.originalUrl ?? req.url}\n`).update(bytes).digest('base64url')
}

/** A response for the client: `{ status, headers, body }`. */
function problem(status, title) {
  return { status, headers: { 'content-type': 'application/problem+json' }, body: Buffer.from(JSON.stringify({ status, title })) }
}

/** A request's lock: one attempt (a duplicate in flight gets 409), renewed while its handler runs. */
const LOCK = lockInit({ wait: 0, autoExtend: true }, { canWait: true })

/**
 * What to do with a request (the framework's `req`, its key header's value `key`): `{ respond }` (an error, or the
 * stored response), `{ ctx, done }` (its turn: the handler runs with `ctx`, its run's context, then `done(response)`
 * ends the run, resolving once the response, unless null, is stored and the lock given back), or `{}` (no key: the
 * handler runs as usual). Rejects when Redis cannot be asked (the handler does not run).
 */
async function decide(locker, s, req, key) {
  if (key === undefined) return s.required ? { respond: problem(400, `the ${s.header} header is required`) } : {}
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    return { respond: problem(400, `the ${s.header} header must be 1 to ${MAX_KEY_LENGTH} characters`) }
  }
  const fingerprint = String(await s.fingerprint(req))
  const scoped = crypto.createHash('sha256').update(String(await s.scope(req))).update('\n').update(key).digest('base64url')
  /** @type {(turn: { ctx: object, finish: (response: object | null) => void }) => void} */
  let taken = () => {}
  const turn = new Promise((resolve) => {
    taken = resolve
  })
  // The request's run: its fn is the handler's turn, and comes to the response to keep (or null).
  const fn = (ctx) => new Promise((finish) => taken({ ctx, finish }))
  const store = (run) => {
    const { threw, value } = run.did()
    return threw || value === null ? null : [false, Buffer.from(JSON.stringify({ fingerprint, ...value }))]
  }
  const options = { lock: LOCK, storeErrors: true, resultTtl: s.ttl, store }
  const ran = locker[sharedRun](`idempotency:${scoped}`, fn, options, 'idempotency')
  const first = await Promise.race([turn, ran.then((got) => ({ got }), (error) => ({ error }))])
  if ('ctx' in first) {
    const done = (response) => {
      first.finish(response)
      return ran.then(
        () => {},
        () => {},
      )
    }
    return { ctx: first.ctx, done }
  }
  if ('error' in first) {
    if (first.error?.code === 'ERR_SNATCH_TIMEOUT') return { respond: problem(409, 'a request with this key is being processed') }
    throw first.error
  }
  const record = JSON.parse(first.got.stored.bytes.toString('utf8'))
  if (record.fingerprint !== fingerprint) return { respond: problem(422, 'this key was used for another request') }
  const headers = { ...Object.fromEntries(record.headers), [REPLAYED_HEADER]: 'true' }
  return { respond: { status: record.status, headers, body: Buffer.from(record.body, 'base64') } }
}

/**
 * The handler's response (`status`, `headers`, `body`: null when not kept, over maxBytes or a stream) as kept: null
 * when it is a server error or not kept.
 */
function kept({ status, headers, body }) {
  if (body === null || status >= 500) return null
  const stored = Object.entries(headers).filter(([name, value]) => !UNSTORED_HEADERS.has(name.toLowerCase()) && value !== undefined)
  return { status, headers: stored, body: body.toString('base64') }
}

/** Express middleware: see docs/locks.md, "HTTP idempotency keys". */
function idempotency(locker, options) {
  checkLocker(locker)
  const s = settingsOf(options)
  return function idempotencyMiddleware(req, res, next) {
    decide(locker, s, req, req.headers[s.header]).then((decision) => {
      if (decision.respond) return send(res, decision.respond)
      if (decision.ctx) {
        req.idempotency = decision.ctx // its run's signal, fence and validUntil
        capture(res, s, decision.done)
      }
      next()
    }, next)
  }
}

/** Sends `response` with Node's response API. */
function send(res, { status, headers, body }) {
  res.statusCode = status
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value)
  res.end(body)
}

/**
 * Keeps what the handler writes on `res` (up to maxBytes); when it ends the response, ends the request's run with it
 * (`done`: stored, and the lock given back) before the end goes out; a response cut before its end ends the run with
 * nothing kept.
 */
function capture(res, s, done) {
  const chunks = []
  let size = 0
  const keep = (chunk, encoding) => {
    if (chunk === undefined || chunk === null || typeof chunk === 'function') return
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8')
    size += bytes.length
    if (size <= s.maxBytes) chunks.push(bytes)
  }
  const { write, end } = res
  res.write = function (chunk, encoding, ...rest) {
    keep(chunk, encoding)
    return write.call(this, chunk, encoding, ...rest)
  }
  let ended = false
  res.end = function (chunk, encoding, ...rest) {
    res.end = end
    ended = true
    keep(chunk, encoding)
    const body = size <= s.maxBytes ? Buffer.concat(chunks) : null
    done(kept({ status: res.statusCode, headers: res.getHeaders(), body })).then(() => end.call(this, chunk, encoding, ...rest))
    return this
  }
  res.once('close', () => {
    if (!ended) done(null)
  })
}

/** Fastify plugin: `fastify.register(fastifyIdempotency, { locker, ...options })`; see docs/locks.md, "HTTP idempotency keys". */
async function fastifyIdempotency(fastify, options) {
  const { locker, ...rest } = options ?? {}
  checkLocker(locker)
  const s = settingsOf(rest)
  const runs = new WeakMap()
  fastify.addHook('preHandler', async (request, reply) => {
    const decision = await decide(locker, s, request, request.headers[s.header])
    if (decision.respond) {
      const { status, headers, body } = decision.respond
      return reply.code(status).headers(headers).send(body)
    }
    if (decision.ctx) {
      request.idempotency = decision.ctx
      runs.set(request, decision.done)
    }
  })
  fastify.addHook('onSend', async (request, reply, payload) => {
    const done = runs.get(request)
    if (done === undefined) return payload
    runs.delete(request)
    const body = typeof payload === 'string' ? Buffer.from(payload) : Buffer.isBuffer(payload) ? payload : null
    const within = body !== null && body.length <= s.maxBytes ? body : null
    await done(kept({ status: reply.statusCode, headers: reply.getHeaders(), body: within }))
    return payload
  })
  fastify.addHook('onResponse', async (request) => {
    const done = runs.get(request)
    if (done === undefined) return
    runs.delete(request)
    await done(null)
  })
}
// Its hooks apply where it is registered, not in a scope of its own (as fastify-plugin does).
fastifyIdempotency[Symbol.for('skip-override')] = true

/** Checks that `locker` is one. */
function checkLocker(locker) {
  if (!(locker instanceof Locker)) throw invalidArg(TypeError, 'locker must be a Locker (createLocker())')
}

module.exports = { idempotency, fastifyIdempotency }
