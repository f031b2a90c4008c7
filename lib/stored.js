'use strict'

const { invalidArg } = require('./errors')
const { occurrenceRecord } = require('./fleet')
const { describe } = require('./options')

/** The spec's fields that are times: a Date or epoch ms. */
const TIMES = ['at', 'startAt', 'endAt']

/**
 * A stored schedule's spec as the core reads it (JSON; times as epoch ms, `data` as it is stored: JSON). The core
 * checks the rest (one of cron, every and at, bounds, unknown options).
 */
function storedSpec(spec) {
  if (spec === null || typeof spec !== 'object' || Array.isArray(spec)) {
    throw invalidArg(TypeError, `spec must be an object, got ${describe(spec)}`)
  }
  const out = { ...spec }
  for (const name of TIMES) {
    const value = out[name]
    if (value instanceof Date) out[name] = value.getTime()
    else if (value !== undefined && typeof value !== 'number') {
      throw invalidArg(TypeError, `${name} must be a Date or epoch milliseconds, got ${describe(value)}`)
    }
    if (out[name] !== undefined && !Number.isFinite(out[name])) {
      throw invalidArg(RangeError, `${name} must be a valid time, got ${describe(value)}`)
    }
  }
  if ('data' in out) {
    let json
    try {
      json = JSON.stringify(out.data)
    } catch (err) {
      throw invalidArg(TypeError, `data must be storable as JSON: ${err.message}`)
    }
    if (json === undefined) throw invalidArg(TypeError, `data must be storable as JSON, got ${describe(out.data)}`)
  }
  for (const name of ['handler', 'cron', 'timezone', 'concurrency']) {
    if (out[name] !== undefined && typeof out[name] !== 'string') {
      throw invalidArg(TypeError, `${name} must be a string, got ${describe(out[name])}`)
    }
  }
  try {
    return JSON.stringify(out)
  } catch (err) {
    throw invalidArg(TypeError, `spec must be storable as JSON: ${err.message}`)
  }
}

/** A stored schedule as the core tells it (index.d.ts `StoredScheduleInfo`). */
function storedInfo(s) {
  const date = (ms) => (ms === null || ms === undefined ? null : new Date(ms))
  return {
    id: s.id,
    handler: s.handler,
    cron: s.cron,
    every: s.every,
    at: date(s.at),
    timezone: s.timezone,
    data: s.data,
    startAt: date(s.startAt),
    endAt: date(s.endAt),
    limit: s.limit,
    next: date(s.next),
    suspended: s.suspended,
    runs: s.runs,
    last: s.last ? occurrenceRecord(s.last) : null,
    running: s.running.map(occurrenceRecord),
    health: s.health,
    runners: s.runners,
    finished: date(s.finished),
  }
}

module.exports = { storedSpec, storedInfo }
