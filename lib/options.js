'use strict'

const { invalidArg } = require('./errors')

/** The single-server default when neither `url` nor `urls` nor REDIS_URL is given. */
const DEFAULT_URL = 'redis://127.0.0.1:6379'

function checkType(name, value, type) {
  if (value !== undefined && typeof value !== type) {
    throw invalidArg(TypeError, `${name} must be a ${type}, got ${describe(value)}`)
  }
}

function describe(value) {
  if (value === null) return 'null'
  if (Array.isArray(value)) return 'an array'
  return typeof value === 'string' ? `the string '${value}'` : `a ${typeof value}`
}

function checkObject(name, value) {
  if (value !== undefined && (value === null || typeof value !== 'object')) {
    throw invalidArg(TypeError, `${name} must be an object, got ${describe(value)}`)
  }
  return value ?? {}
}

/** Checks the JS types of LockerOptions and resolves the URL list (`url`, else `urls`, else REDIS_URL). */
function lockerInit(options) {
  const o = checkObject('options', options)
  checkType('url', o.url, 'string')
  if (o.urls !== undefined && !(Array.isArray(o.urls) && o.urls.every((u) => typeof u === 'string'))) {
    throw invalidArg(TypeError, `urls must be an array of strings, got ${describe(o.urls)}`)
  }
  if (o.url !== undefined && o.urls !== undefined) {
    throw invalidArg(TypeError, 'url and urls are exclusive: give one Redis (url) or a Redlock set (urls)')
  }
  if (o.urls !== undefined && o.urls.length < 3) {
    throw invalidArg(RangeError, `urls must list an odd number (>= 3) of independent Redis masters, got ${o.urls.length}`)
  }
  checkType('prefix', o.prefix, 'string')
  for (const name of ['ttl', 'commandTimeout', 'driftFactor']) checkType(name, o[name], 'number')
  const urls = o.urls ?? [o.url ?? (process.env.REDIS_URL || DEFAULT_URL)]
  return { urls, prefix: o.prefix, ttl: o.ttl, commandTimeout: o.commandTimeout, driftFactor: o.driftFactor }
}

/**
 * Checks the JS types of LockOptions (and `wait` when `canWait`); undefined without options. The native side
 * range-checks the numbers and applies the defaults (autoExtend: true for runs, false for locks).
 */
function lockInit(options, { canWait }) {
  if (options === undefined) return undefined
  const o = checkObject('options', options)
  checkType('ttl', o.ttl, 'number')
  checkType('minHold', o.minHold, 'number')
  checkType('autoExtend', o.autoExtend, 'boolean')
  if (canWait) {
    checkType('wait', o.wait, 'number')
  } else if (o.wait !== undefined) {
    throw invalidArg(TypeError, 'this method makes one attempt and takes no wait option; use withLock() or lock()')
  }
  return { ttl: o.ttl, minHold: o.minHold, wait: o.wait, autoExtend: o.autoExtend }
}

/**
 * Checks the JS types of ScheduleOptions. The test-only environment variable SNATCH_TEST_CLOCK_OFFSET_MS shifts
 * this process's clock for the scheduler, to simulate replicas with skewed clocks.
 */
function scheduleInit(options) {
  const o = checkObject('options', options)
  checkType('ttl', o.ttl, 'number')
  checkType('timezone', o.timezone, 'string')
  const offset = process.env.SNATCH_TEST_CLOCK_OFFSET_MS
  if (offset !== undefined && !Number.isSafeInteger(Number(offset))) {
    throw invalidArg(TypeError, `SNATCH_TEST_CLOCK_OFFSET_MS must be an integer, got '${offset}'`)
  }
  return { ttl: o.ttl, timezone: o.timezone, clockOffset: offset === undefined ? undefined : Number(offset) }
}

/** Checks that `key` is a string (emptiness and length are checked natively). */
function checkKey(key) {
  if (typeof key !== 'string') throw invalidArg(TypeError, `key must be a string, got ${describe(key)}`)
}

/** Checks that `fn` is a function. */
function checkFn(fn) {
  if (typeof fn !== 'function') throw invalidArg(TypeError, `fn must be a function, got ${describe(fn)}`)
}

module.exports = { lockerInit, lockInit, scheduleInit, checkKey, checkFn, checkType }
