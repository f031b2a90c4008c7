'use strict'
// What this process's calls and schedules count, read once from the diagnostics_channel messages (lib/diagnostics.js),
// and the metrics that count it: acquisitions by outcome, waits, holds, locks held, leases lost, scheduled attempts,
// start lags and missed occurrences. The OpenTelemetry (lib/otel.js) and prom-client (lib/prometheus.js) integrations
// each record them in their own instruments.

const dc = require('node:diagnostics_channel')
const diagnostics = require('./diagnostics')
const { LIMITS } = require('./native')

/**
 * The metrics, by id: OpenTelemetry's name, instrument (`counter`, `histogram`, `updown`: an up-down counter), unit
 * and description, and the attributes of each (`redis_snatch.<attribute>`; and `redis_snatch.key` when asked). The
 * Prometheus names follow from them as OpenTelemetry's Prometheus exporter writes them (lib/prometheus.js).
 */
const METRICS = {
  acquisitions: {
    name: 'redis_snatch.lock.acquisitions',
    instrument: 'counter',
    unit: '{acquisition}',
    attributes: ['method', 'outcome'],
    description: 'Attempts to take a lock, by outcome: acquired, busy (held by another), timeout, error',
  },
  wait: {
    name: 'redis_snatch.lock.wait.duration',
    instrument: 'histogram',
    unit: 's',
    attributes: ['method'],
    description: 'From a call to its lock acquired, or found held',
  },
  hold: {
    name: 'redis_snatch.lock.hold.duration',
    instrument: 'histogram',
    unit: 's',
    attributes: ['method'],
    description: 'How long a lock was held, from its acquisition to its release or loss',
  },
  held: {
    name: 'redis_snatch.lock.held',
    instrument: 'updown',
    unit: '{lock}',
    attributes: ['method'],
    description: 'Locks held now by this process (runs, locks, permits, scheduled attempts)',
  },
  lost: {
    name: 'redis_snatch.lock.lost',
    instrument: 'counter',
    unit: '{lease}',
    attributes: ['method'],
    description: 'Leases lost while held',
  },
  attempts: {
    name: 'redis_snatch.schedule.attempts',
    instrument: 'counter',
    unit: '{attempt}',
    attributes: ['schedule', 'ending'],
    description: 'Scheduled attempts run here, by how they ended: ok, failed, timeout, replaced, lost',
  },
  lag: {
    name: 'redis_snatch.schedule.start_lag',
    instrument: 'histogram',
    unit: 's',
    attributes: ['schedule'],
    description: "From an occurrence's tick to its fn's call, here",
  },
  missed: {
    name: 'redis_snatch.schedule.missed',
    instrument: 'counter',
    unit: '{occurrence}',
    attributes: ['schedule', 'reason'],
    description: 'Occurrences this process recorded missed, by reason: deadline, superseded, overlap, suspended',
  },
}

/**
 * The metrics of the keys waited for most (`locker.contention()`), per key: gauges read on collection from the
 * core's table (at most LIMITS.contentionKeys keys per locker, whose counts start again when a key leaves the table
 * or on `reset`: gauges, not counters). Only where `keyLabel` allows a key label.
 */
const CONTENTION = {
  waits: {
    name: 'redis_snatch.lock.contention.waits',
    unit: '{wait}',
    description: "Waits of this process's waiting calls for the keys waited for most (a bounded table; by key label)",
  },
  waitMs: {
    name: 'redis_snatch.lock.contention.wait',
    unit: 's',
    description: 'The time those waits took, in all',
  },
  timeouts: {
    name: 'redis_snatch.lock.contention.timeouts',
    unit: '{wait}',
    description: 'Those waits that timed out',
  },
}

/**
 * The contention of `locker`'s keys by their label (`keyOf(key)`, several keys may share one), each `{ waits, waitMs,
 * timeouts }` summed over its keys; the whole table's keys.
 */
function contentionByLabel(locker, keyOf) {
  const byLabel = new Map()
  for (const { key, waits, waitMs, timeouts } of locker.contention({ limit: LIMITS.contentionKeys })) {
    const label = String(keyOf(key))
    const sum = byLabel.get(label) ?? { waits: 0, waitMs: 0, timeouts: 0 }
    byLabel.set(label, { waits: sum.waits + waits, waitMs: sum.waitMs + waitMs, timeouts: sum.timeouts + timeouts })
  }
  return byLabel
}

/** The methods whose end is published on the release channel after a loss too (their fn ran under the lock). */
const RUNS = new Set(['withLock', 'snatchTask', 'withPermit', 'withRead', 'withWrite', 'withLocks', 'shared', 'idempotency', 'lead', 'schedule'])

/**
 * A memo of label sets by a metric, the values of its attributes and a key label (undefined: none), `[metric, values,
 * label] → made(metric, values, label)`: the integrations record the same few sets (methods and outcomes, schedules
 * and endings) again and again, and a set made once saves building it on every call. Looked up by a map per value,
 * which builds no string on the way.
 */
function labelSets(made) {
  const sets = new Map()
  return (metric, values, label) => {
    let map = sets.get(metric)
    if (map === undefined) sets.set(metric, (map = new Map()))
    for (let i = 0; i < values.length; i++) {
      let next = map.get(values[i])
      if (next === undefined) map.set(values[i], (next = new Map()))
      map = next
    }
    let labels = map.get(label)
    if (labels === undefined) {
      labels = made(metric, values, label)
      map.set(label, labels)
    }
    return labels
  }
}

/** Seconds, from milliseconds (the unit of durations). */
const seconds = (ms) => ms / 1000

/**
 * Has `record(metric, value, values, key)` told of what the calls and schedules of `only` (a Locker; null: every
 * Locker of the process) do, from now on: `metric` an id of METRICS, `value` what to add (a counter, an up-down
 * counter: 1 or -1) or to record (a histogram, seconds), `values` the values of its attributes in the order of its
 * `attributes`, `key` the lock's key (undefined for a schedule's metrics). Returns a function that stops it.
 */
function countCalls(only, record) {
  /**
   * Each call seen starting, on its `start` message (a property of this counting's own: cheaper than a WeakMap, whose
   * entries every collection visits): whether its lock was acquired, and is held now.
   */
  const CALL = Symbol('redis-snatch call metrics')
  const seen = (start) => start?.[CALL]
  const forget = (start) => (start[CALL] = undefined)
  /** The call of `start` holds its lock no longer (once). */
  const unheld = (call, start, key) => {
    if (!call.held) return
    call.held = false
    record('held', -1, [start.method], key)
  }
  const busy = ({ key, ms, start }) => {
    if (seen(start) === undefined) return
    record('acquisitions', 1, [start.method, 'busy'], key)
    record('wait', seconds(ms), [start.method], key)
    forget(start)
  }
  const handlers = {
    [diagnostics.start.name]: (start) => {
      if (only === null || start.locker === only) start[CALL] = { acquired: false, held: false }
    },
    [diagnostics.acquire.name]: ({ key, ms, start }) => {
      const call = seen(start)
      if (call === undefined) return
      const { method } = start
      record('acquisitions', 1, [method, 'acquired'], key)
      record('held', 1, [method], key)
      call.acquired = true
      call.held = true
      if (method === 'schedule') record('lag', seconds(ms), [start.schedule])
      else record('wait', seconds(ms), [method], key)
    },
    [diagnostics.busy.name]: busy,
    [diagnostics.release.name]: ({ key, ms, start }) => {
      const call = seen(start)
      if (call === undefined) return
      unheld(call, start, key)
      if (start.method !== 'schedule') {
        record('hold', seconds(ms), [start.method], key)
        forget(start)
      }
    },
    [diagnostics.lost.name]: ({ key, ms, start }) => {
      const call = seen(start)
      if (call === undefined) return
      record('lost', 1, [start.method], key)
      if (!RUNS.has(start.method)) {
        // A lock the caller holds ends with its loss (a run's end follows it on the release channel).
        unheld(call, start, key)
        record('hold', seconds(ms), [start.method], key)
        forget(start)
      }
    },
    [diagnostics.error.name]: ({ key, ms, error, start }) => {
      const call = seen(start)
      if (call === undefined) return
      const outcome = error?.code === 'ERR_SNATCH_TIMEOUT' ? 'timeout' : 'error'
      // A campaign not elected within its `retry`: it looks again; another replica leads, as it should.
      if (start.method === 'lead' && outcome === 'timeout') return busy({ key, ms, start })
      if (!call.acquired) record('acquisitions', 1, [start.method, outcome], key)
      unheld(call, start, key)
      forget(start)
    },
    [diagnostics.attempt.name]: ({ schedule, ending, start }) => {
      if (only === null || start?.locker === only) record('attempts', 1, [schedule, ending])
    },
    [diagnostics.missed.name]: ({ schedule, reason, locker }) => {
      if (only === null || locker === only) record('missed', 1, [schedule, reason])
    },
  }
  for (const [name, handler] of Object.entries(handlers)) dc.subscribe(name, handler)
  return () => {
    for (const [name, handler] of Object.entries(handlers)) dc.unsubscribe(name, handler)
  }
}

module.exports = { CONTENTION, METRICS, RUNS, contentionByLabel, countCalls, labelSets }
