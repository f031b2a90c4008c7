'use strict'

const fs = require('node:fs')
const os = require('node:os')
const { clientOptions } = require('./client-options')
const { fromNative, invalidArg } = require('./errors')
const { LIMITS, NativeLocker } = require('./native')

function checkType(name, value, type) {
  if (value !== undefined && typeof value !== type) {
    throw invalidArg(TypeError, `${name} must be a ${type}, got ${describe(value)}`)
  }
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  // A URL's password never goes into an error.
  return typeof value === 'string' ? `the string '${value.replace(/\/\/([^:@/]*):[^@]*@/, '//$1:***@')}'` : `a ${typeof value}`
}

function checkObject(name, value) {
  if (value !== undefined && (value === null || typeof value !== 'object')) {
    throw invalidArg(TypeError, `${name} must be an object, got ${describe(value)}`)
  }
  return value ?? {}
}

/**
 * The `names` options of object `value` (or none when undefined), each read once: a getter or Proxy cannot give the
 * type check one value and the native side another. A key of `value` that is not one of `names` is an error naming
 * it (and the closest of `names`): a mistyped option must not quietly leave its default in place.
 */
function snapshot(name, value, names) {
  const o = checkObject(name, value)
  for (const key of Object.keys(o)) {
    if (!names.includes(key)) throw unknownOption(name, key, names)
  }
  const copy = {}
  for (const n of names) copy[n] = o[n]
  return copy
}

/** The error for option `key`, which object `name` does not take; `known` are the options it does take. */
function unknownOption(name, key, known) {
  const path = (option) => `'${name === 'options' ? option : `${name}.${option}`}'`
  const closest = closestNames(key, known)
  const hint = closest.length === 0 ? `; known options: ${known.join(', ')}` : ` (did you mean ${closest.map(path).join(' or ')}?)`
  return invalidArg(TypeError, `unknown option ${path(key)}${hint}`)
}

/**
 * The names of `names` closest to `key` by edit distance (letter case aside), if they are close enough to be a typo
 * of it: at most 2 edits, and fewer than half of the key's letters. Several when they are equally close.
 */
function closestNames(key, names) {
  const limit = Math.min(2, Math.ceil(key.length / 2) - 1)
  const distances = names.map((n) => editDistance(key.toLowerCase(), n.toLowerCase()))
  const least = Math.min(...distances)
  return least > limit ? [] : names.filter((_, i) => distances[i] === least)
}

/** The Levenshtein distance between `a` and `b` (insertions, deletions, substitutions, transpositions). */
function editDistance(a, b) {
  const d = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array(b.length).fill(0)])
  for (let j = 1; j <= b.length; j++) d[0][j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1)
    }
  }
  return d[a.length][b.length]
}

/** The options of LockerOptions. */
const LOCKER_OPTIONS = [
  'url', 'urls', 'cluster', 'sentinel', 'client', 'tls', 'username', 'password', 'waitReplicas', 'fenceTtl', 'prefix',
  'ttl', 'commandTimeout', 'driftFactor', 'instanceId', 'maxStall',
]
/** The options `client` stands for: where and how to connect. */
const CLIENT_GIVES = ['url', 'urls', 'cluster', 'sentinel', 'tls', 'username', 'password']

/**
 * Checks the JS types of LockerOptions and resolves the URLs (`url`, `urls`, `cluster` or `sentinel.urls`, the
 * `client`'s settings, else REDIS_URL).
 */
function lockerInit(options) {
  const o = snapshot('options', options, LOCKER_OPTIONS)
  if (o.client !== undefined) {
    const given = CLIENT_GIVES.filter((name) => o[name] !== undefined)
    if (given.length > 0) {
      throw invalidArg(TypeError, `client gives where and how to connect: ${given.join(' and ')} cannot be given with it`)
    }
    Object.assign(o, clientOptions(o.client))
  }
  checkType('url', o.url, 'string')
  for (const name of ['urls', 'cluster']) o[name] = checkStrings(name, o[name])
  const sentinel = snapshot('sentinel', o.sentinel, ['urls', 'name'])
  if (o.sentinel !== undefined) {
    sentinel.urls = checkStrings('sentinel.urls', sentinel.urls)
    if (sentinel.urls === undefined || sentinel.urls.length === 0) {
      throw invalidArg(TypeError, 'sentinel.urls must list at least one sentinel URL')
    }
    if (typeof sentinel.name !== 'string' || sentinel.name === '') {
      throw invalidArg(TypeError, `sentinel.name must be the monitored master's name, got ${describe(sentinel.name)}`)
    }
  }
  const given = ['url', 'urls', 'cluster', 'sentinel'].filter((name) => o[name] !== undefined)
  if (given.length > 1) {
    throw invalidArg(TypeError, `${given.join(' and ')} are exclusive: give one Redis (url), a Redlock set (urls), a cluster or a sentinel`)
  }
  if (o.urls !== undefined && o.urls.length < 3) {
    throw invalidArg(RangeError, `urls must list an odd number (>= 3) of independent Redis masters, got ${o.urls.length}`)
  }
  if (o.cluster !== undefined && o.cluster.length === 0) {
    throw invalidArg(TypeError, 'cluster must list at least one seed node URL')
  }
  checkType('prefix', o.prefix, 'string')
  for (const name of ['ttl', 'commandTimeout', 'driftFactor', 'waitReplicas', 'fenceTtl', 'maxStall']) {
    checkType(name, o[name], 'number')
  }
  for (const name of ['username', 'password', 'instanceId']) checkType(name, o[name], 'string')
  const urls = o.urls ?? o.cluster ?? (o.sentinel && sentinel.urls) ?? [o.url ?? (process.env.REDIS_URL || LIMITS.defaultUrl)]
  return {
    urls,
    cluster: o.cluster !== undefined,
    sentinelName: o.sentinel === undefined ? undefined : sentinel.name,
    tls: tlsInit(o.tls, urls),
    username: o.username,
    password: o.password,
    waitReplicas: o.waitReplicas,
    fenceTtl: o.fenceTtl,
    // Bun and Deno run N-API modules without libuv's socket polling, which the direct connection needs.
    direct: !(process.versions.bun || process.versions.deno),
    prefix: o.prefix ?? (process.env.SNATCH_PREFIX || undefined),
    ttl: o.ttl,
    commandTimeout: o.commandTimeout,
    driftFactor: o.driftFactor,
    instanceId: o.instanceId ?? `${os.hostname()}:${process.pid}`,
    maxStall: o.maxStall,
  }
}

/** A copy of `value`, which must be an array of strings if given. */
function checkStrings(name, value) {
  const copy = Array.isArray(value) ? Array.from(value) : value
  if (copy !== undefined && !(Array.isArray(copy) && copy.every((u) => typeof u === 'string'))) {
    throw invalidArg(TypeError, `${name} must be an array of strings, got ${describe(value)}`)
  }
  return copy
}

/** PEM text of a string or Buffer option. */
function pem(name, value) {
  if (typeof value === 'string') return value
  if (Buffer.isBuffer(value)) return value.toString('utf8')
  throw invalidArg(TypeError, `${name} must be a string or a Buffer (PEM), got ${describe(value)}`)
}

/**
 * The TLS options as the native side takes them: PEM text, and, when no `ca` replaces the default trust, the
 * certificates NODE_EXTRA_CA_CERTS names (Node's own way to add to it). Undefined when no URL uses TLS; `tls` given
 * for plaintext URLs is an error rather than silently plaintext.
 */
function tlsInit(tls, urls) {
  const o = snapshot('tls', tls, ['ca', 'cert', 'key', 'servername', 'rejectUnauthorized'])
  const secure = urls.some((url) => url.startsWith('rediss://'))
  if (!secure) {
    if (tls !== undefined) {
      throw invalidArg(TypeError, 'tls options were given but no URL uses TLS: use rediss:// URLs (redis:// is plaintext)')
    }
    return undefined
  }
  const ca = o.ca === undefined ? undefined : (Array.isArray(o.ca) ? o.ca : [o.ca]).map((c, n) => pem(`tls.ca[${n}]`, c))
  checkType('tls.servername', o.servername, 'string')
  checkType('tls.rejectUnauthorized', o.rejectUnauthorized, 'boolean')
  return {
    ca,
    extraCa: ca === undefined ? extraCertificates() : undefined,
    cert: o.cert === undefined ? undefined : pem('tls.cert', o.cert),
    key: o.key === undefined ? undefined : pem('tls.key', o.key),
    servername: o.servername,
    rejectUnauthorized: o.rejectUnauthorized,
  }
}

/** The PEM file NODE_EXTRA_CA_CERTS names, if set and readable (Node itself warns at start-up when it is not). */
function extraCertificates() {
  const file = process.env.NODE_EXTRA_CA_CERTS
  if (!file) return undefined
  try {
    return fs.readFileSync(file, 'utf8')
  } catch {
    return undefined
  }
}

/**
 * Checks the JS types of LockOptions; `wait`, and `fair: true`, only when `canWait`. Undefined without options. The
 * native side range-checks the numbers and applies the defaults (autoExtend: true for runs, false for locks).
 */
function lockInit(options, { canWait }) {
  if (options === undefined) return undefined
  const o = snapshot('options', options, ['ttl', 'minHold', 'autoExtend', 'wait', 'fair', 'reentrant'])
  checkType('ttl', o.ttl, 'number')
  checkType('reentrant', o.reentrant, 'boolean')
  checkType('minHold', o.minHold, 'number')
  checkType('autoExtend', o.autoExtend, 'boolean')
  checkType('fair', o.fair, 'boolean')
  if (canWait) {
    checkType('wait', o.wait, 'number')
  } else if (o.wait !== undefined || o.fair) {
    const option = o.wait !== undefined ? 'wait' : 'fair'
    throw invalidArg(TypeError, `this method makes one attempt and takes no ${option} option; use withLock() or lock()`)
  }
  return { ttl: o.ttl, minHold: o.minHold, wait: o.wait, autoExtend: o.autoExtend, fair: o.fair, reentrant: o.reentrant }
}

/** Has the core check option `name`'s number `value` (an integer in its range); its coded RangeError when not. */
function checkRange(name, value) {
  try {
    NativeLocker.checkOption(name, value)
  } catch (err) {
    throw fromNative(err)
  }
}

/** A positive integer option `name` (ms or bytes, in the core's range), or `fallback` when not given. */
function positiveOption(name, value, fallback) {
  checkType(name, value, 'number')
  if (value === undefined) return fallback
  if (!(value > 0)) throw invalidArg(RangeError, `${name} must be a positive integer, got ${value}`)
  checkRange(name, value)
  return value
}

/**
 * Checks close()'s options: how long the fns running get to finish, in ms (`drain: false`: none; `timeout`: 0, an
 * integer of ms, or Infinity, the default: all the time they take): undefined for no limit.
 */
function closeDrain(options) {
  if (options === undefined) return undefined
  const o = snapshot('options', options, ['drain', 'timeout'])
  checkType('drain', o.drain, 'boolean')
  checkType('timeout', o.timeout, 'number')
  const { timeout = Infinity } = o
  if (timeout !== Infinity && timeout !== 0) checkRange('timeout', timeout)
  if (o.drain === false || timeout === 0) return 0
  return timeout === Infinity ? undefined : timeout
}

/**
 * Checks the JS types of ScheduleOptions. The test-only environment variable SNATCH_TEST_CLOCK_OFFSET_MS shifts
 * this process's clock for the scheduler, to simulate replicas with skewed clocks.
 * @returns {import('./binding').ScheduleInit}
 */
function scheduleInit(options) {
  const o = snapshot('options', options, [
    'ttl', 'timezone', 'startingDeadline', 'retries', 'retryDelay', 'concurrency', 'timeout', 'maxRuntime', 'history',
    'jitter',
  ])
  for (const name of ['ttl', 'startingDeadline', 'retryDelay', 'timeout', 'maxRuntime', 'jitter']) {
    checkType(name, o[name], 'number')
  }
  for (const name of ['retries', 'history']) {
    checkType(name, o[name], 'number')
    if (o[name] !== undefined) checkRange(name, o[name])
  }
  checkType('timezone', o.timezone, 'string')
  checkType('concurrency', o.concurrency, 'string')
  const offset = process.env.SNATCH_TEST_CLOCK_OFFSET_MS
  if (offset !== undefined && !Number.isSafeInteger(Number(offset))) {
    throw invalidArg(TypeError, `SNATCH_TEST_CLOCK_OFFSET_MS must be an integer, got '${offset}'`)
  }
  return { ...o, clockOffset: offset === undefined ? undefined : Number(offset) }
}

/** Checks that `value` is a string (required, unlike the options `checkType` checks). */
function checkString(name, value) {
  if (typeof value !== 'string') throw invalidArg(TypeError, `${name} must be a string, got ${describe(value)}`)
}

/**
 * Checks that `key` is a well-formed string (emptiness and length are checked natively): a lone surrogate would
 * become U+FFFD in UTF-8, making distinct JS keys one lock.
 */
function checkKey(key) {
  checkString('key', key)
  if (!key.isWellFormed()) throw invalidArg(TypeError, 'key must be well-formed UTF-16 (it has a lone surrogate)')
}

/** Checks that `fn` is a function. */
function checkFn(fn) {
  if (typeof fn !== 'function') throw invalidArg(TypeError, `fn must be a function, got ${describe(fn)}`)
}

module.exports = {
  LOCKER_OPTIONS,
  checkRange,
  lockerInit,
  lockInit,
  scheduleInit,
  closeDrain,
  positiveOption,
  checkKey,
  checkFn,
  checkString,
  checkType,
  describe,
  snapshot,
}
