'use strict'
// redis-snatch/idempotency: the HTTP `Idempotency-Key` header (draft-ietf-httpapi-idempotency-key-header) for
// Express and Fastify, on shared results: the first request with a key runs the handler under the key's lock and its
// response is stored; a duplicate while it runs gets 409, a later one the stored response, byte for byte (422 when
// its request differs).

const crypto = require('node:crypto')
const { Locker, sharedTurn } = require('./locker')
const { invalidArg } = require('./errors')
const { heldContext } = require('./lock')
const { checkType, positiveOption, snapshot } = require('./options')

const DEFAULT_TTL_MS = 24 * 60 * 60 * 1000
const DEFAULT_MAX_BYTES = 1024 * 1024
/** The longest key accepted, in characters. */
const MAX_KEY_LENGTH = 255
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
    maxBytes: positiveOption('maxBytes', o.maxBytes, DEFAULT_MAX_BYTES),
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

/**
 * What to do with a request (the framework's `req`, its key header's value `key`): `{ respond }` (an error, or the
 * stored response), `{ run }` (the turn: run the handler, then `finish`), or `{}` (no key: the handler runs as usual).
 * Rejects when Redis cannot be asked (the handler does not run).
 */
async function decide(locker, s, req, key) {
  if (key === undefined) return s.required ? { respond: problem(400, `the ${s.header} header is required`) } : {}
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_KEY_LENGTH) {
    return { respond: problem(400, `the ${s.header} header must be 1 to ${MAX_KEY_LENGTH} characters`) }
  }
  const fingerprint = String(await s.fingerprint(req))
  const scoped = crypto.createHash('sha256').update(String(await s.scope(req))).update('\n').update(key).digest('base64url')
  let turn
  try {
    turn = await locker[sharedTurn](`idempotency:${scoped}`, { wait: 0, autoExtend: true }, true, 'idempotency')
  } catch (err) {
    if (err?.code === 'ERR_SNATCH_TIMEOUT') return { respond: problem(409, 'a request with this key is being processed') }
    throw err
  }
  if (turn.stored) {
    const record = JSON.parse(turn.stored.bytes.toString('utf8'))
    if (record.fingerprint !== fingerprint) return { respond: problem(422, 'this key was used for another request') }
    return { respond: { status: record.status, headers: Object.fromEntries(record.headers), body: Buffer.from(record.body, 'base64') } }
  }
  return { run: { ...turn, fingerprint } }
}

/**
 * Stores the handler's response (`status`, `headers`, `body`: null when not kept, over maxBytes or a stream) unless
 * it is a server error or not kept, or the lock was lost. Before the response goes out, so that a client's retry
 * right after it finds it.
 */
async function store(s, run, { status, headers, body }) {
  if (body === null || status >= 500 || run.lock.signal.aborted) return
  const kept = Object.entries(headers).filter(([name, value]) => !UNSTORED_HEADERS.has(name.toLowerCase()) && value !== undefined)
  const record = { fingerprint: run.fingerprint, status, headers: kept, body: body.toString('base64') }
  await run.store(false, Buffer.from(JSON.stringify(record)), s.ttl).catch(() => false)
}

/** Gives the run's lock back (the request is over, its response stored or not). */
async function release(run) {
  await run.lock.release().catch(() => {})
}

/** Express middleware: see docs/locks.md, "HTTP idempotency keys". */
function idempotency(locker, options) {
  checkLocker(locker)
  const s = settingsOf(options)
  return function idempotencyMiddleware(req, res, next) {
    decide(locker, s, req, req.headers[s.header]).then((decision) => {
      if (decision.respond) return send(res, decision.respond)
      if (decision.run) {
        req.idempotency = heldContext(decision.run.lock) // its lock's signal, fence and validUntil
        capture(res, s, decision.run)
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
 * Keeps what the handler writes on `res` (up to maxBytes); when it ends the response, stores it before the end goes
 * out; gives the lock back once the response is over (sent or cut).
 */
function capture(res, s, run) {
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
  let stored = Promise.resolve()
  res.end = function (chunk, encoding, ...rest) {
    res.end = end
    keep(chunk, encoding)
    const body = size <= s.maxBytes ? Buffer.concat(chunks) : null
    stored = store(s, run, { status: res.statusCode, headers: res.getHeaders(), body })
    stored.then(() => end.call(this, chunk, encoding, ...rest))
    return this
  }
  res.once('close', () => stored.then(() => release(run)))
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
    if (decision.run) {
      request.idempotency = heldContext(decision.run.lock)
      runs.set(request, decision.run)
    }
  })
  fastify.addHook('onSend', async (request, reply, payload) => {
    const run = runs.get(request)
    if (run === undefined) return payload
    runs.delete(request)
    const body = typeof payload === 'string' ? Buffer.from(payload) : Buffer.isBuffer(payload) ? payload : null
    const kept = body !== null && body.length <= s.maxBytes ? body : null
    await store(s, run, { status: reply.statusCode, headers: reply.getHeaders(), body: kept })
    await release(run)
    return payload
  })
  fastify.addHook('onResponse', async (request) => {
    const run = runs.get(request)
    if (run === undefined) return
    runs.delete(request)
    await release(run)
  })
}
// Its hooks apply where it is registered, not in a scope of its own (as fastify-plugin does).
fastifyIdempotency[Symbol.for('skip-override')] = true

/** Checks that `locker` is one. */
function checkLocker(locker) {
  if (!(locker instanceof Locker)) throw invalidArg(TypeError, 'locker must be a Locker (createLocker())')
}

module.exports = { idempotency, fastifyIdempotency }
