'use strict'
// `require('redis-snatch/otel')`: OpenTelemetry traces and metrics of every locker in the process (or of one), from what
// redis-snatch publishes on diagnostics_channel (lib/diagnostics.js). `@opentelemetry/api` is the user's (an optional
// peer dependency); the SDK, exporters and providers too. Off, it costs nothing: nothing subscribes.

const dc = require('node:diagnostics_channel')
const fs = require('node:fs')
const path = require('node:path')
const diagnostics = require('./diagnostics')
const { invalidArg } = require('./errors')
const { Locker } = require('./locker')
const { checkType, snapshot } = require('./options')

const api = requireApi()

const NAME = 'redis-snatch'
/** The methods whose end is published on the release channel after a loss too (their fn ran under the lock). */
const RUNS = new Set(['withLock', 'snatchTask', 'lead', 'schedule'])
const VERSION = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'package.json'), 'utf8')).version

/** The application's `@opentelemetry/api`, or an error that says to install it. */
function requireApi() {
  try {
    return require('@opentelemetry/api')
  } catch (cause) {
    if (cause?.code !== 'MODULE_NOT_FOUND') throw cause
    const peer = '@opentelemetry/api'
    const err = new Error(`redis-snatch/otel needs ${peer} (an OpenTelemetry setup has it): npm install ${peer}`, { cause })
    err.code = 'MODULE_NOT_FOUND'
    throw err
  }
}

/** Seconds, from milliseconds (OpenTelemetry's unit of durations). */
const seconds = (ms) => ms / 1000

/**
 * Turns OpenTelemetry on for every locker of the process (or only `locker`'s calls): spans of each wait for a lock,
 * each time one is held (a run of withLock/snatchTask, a leader's term, a lock, a permit), in the caller's active
 * context, and of each attempt of a schedule run here; and metrics. `tracerProvider` and `meterProvider` default to the
 * global ones; `keyLabel` puts a lock's key on its metrics (`true`, or a function of the key giving the label, or
 * `false`: the default, safe with a key per order). `disable()` turns it off again.
 */
function instrument(options) {
  const o = snapshot('options', options, ['tracerProvider', 'meterProvider', 'keyLabel', 'locker'])
  if (o.locker !== undefined && !(o.locker instanceof Locker)) {
    throw invalidArg(TypeError, 'locker must be a Locker (from createLocker)')
  }
  /** The only locker whose calls are seen, or null for all. */
  const only = o.locker ?? null
  if (o.keyLabel !== undefined && typeof o.keyLabel !== 'boolean' && typeof o.keyLabel !== 'function') {
    throw invalidArg(TypeError, 'keyLabel must be a boolean or a function of the key')
  }
  for (const name of ['tracerProvider', 'meterProvider']) checkType(name, o[name], 'object')
  const tracer = (o.tracerProvider ?? api.trace.getTracerProvider()).getTracer(NAME, VERSION)
  const meter = (o.meterProvider ?? api.metrics.getMeterProvider()).getMeter(NAME, VERSION)
  const keyOf = o.keyLabel === true ? (key) => key : typeof o.keyLabel === 'function' ? o.keyLabel : null
  const metrics = instruments(meter)
  /** The spans of each call under way, by its `start` message. */
  const calls = new WeakMap()

  /** The attributes of a call's metrics: its method (and `outcome`), and its key when `keyLabel` says. */
  const labels = (start, key, outcome) => {
    const attributes = { 'redis_snatch.method': start.method }
    if (outcome !== undefined) attributes['redis_snatch.outcome'] = outcome
    if (keyOf !== null) attributes['redis_snatch.key'] = String(keyOf(key))
    return attributes
  }
  /** The call of `start` holds its lock no longer (once): one lock fewer held. */
  const unheld = (start, key) => {
    const call = calls.get(start)
    if (call?.held !== true) return
    call.held = false
    metrics.held.add(-1, labels(start, key))
  }

  const handlers = {
    [diagnostics.start.name]: (start) => {
      if (only !== null && start.locker !== only) return
      const parent = api.context.active()
      if (start.method === 'schedule') {
        const span = tracer.startSpan(
          'redis-snatch attempt',
          {
            attributes: {
              'redis_snatch.schedule': start.schedule,
              'redis_snatch.tick': start.tick.toISOString(),
              'redis_snatch.attempt': start.attempt,
              'redis_snatch.why': start.why,
              'redis_snatch.fence': String(start.fence),
            },
          },
          api.ROOT_CONTEXT,
        )
        calls.set(start, { parent: api.ROOT_CONTEXT, attempt: span })
        start[diagnostics.WRAP] = (fn) => api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, span), fn)
        return
      }
      const attributes = { 'redis_snatch.method': start.method, 'redis_snatch.key': start.key }
      calls.set(start, { parent, wait: tracer.startSpan('redis-snatch wait', { attributes }, parent) })
    },
    [diagnostics.acquire.name]: ({ key, fence, ms, direct, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      metrics.acquisitions.add(1, labels(start, key, 'acquired'))
      metrics.held.add(1, labels(start, key))
      call.held = true
      if (start.method === 'schedule') {
        metrics.lag.record(seconds(ms), { 'redis_snatch.schedule': start.schedule })
        return
      }
      metrics.wait.record(seconds(ms), labels(start, key))
      call.wait.setAttribute('redis_snatch.outcome', 'acquired')
      call.wait.end()
      const attributes = { 'redis_snatch.method': start.method, 'redis_snatch.key': key, 'redis_snatch.fence': String(fence), 'redis_snatch.direct': direct }
      call.hold = tracer.startSpan('redis-snatch hold', { attributes }, call.parent)
      start[diagnostics.WRAP] = (fn) => api.context.with(api.trace.setSpan(call.parent, call.hold), fn)
    },
    [diagnostics.busy.name]: ({ key, ms, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      metrics.acquisitions.add(1, labels(start, key, 'busy'))
      metrics.wait.record(seconds(ms), labels(start, key))
      call.wait.setAttribute('redis_snatch.outcome', 'busy')
      call.wait.end()
      calls.delete(start)
    },
    [diagnostics.release.name]: ({ key, ms, released, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      unheld(start, key)
      if (start.method !== 'schedule') metrics.hold.record(seconds(ms), labels(start, key))
      if (call.hold === undefined) return
      call.hold.setAttribute('redis_snatch.released', released)
      call.hold.end()
      calls.delete(start)
    },
    [diagnostics.lost.name]: ({ key, ms, reason, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      metrics.lost.add(1, labels(start, key))
      const span = call.hold ?? call.attempt
      span?.addEvent('redis-snatch lease lost', reason === undefined ? undefined : { 'redis_snatch.reason': reason })
      span?.setStatus({ code: api.SpanStatusCode.ERROR, message: 'ERR_SNATCH_LOCK_LOST' })
      if (!RUNS.has(start.method)) {
        // A lock the caller holds ends with its loss (a run's end follows it on the release channel).
        unheld(start, key)
        metrics.hold.record(seconds(ms), labels(start, key))
        call.hold?.end()
        calls.delete(start)
      }
    },
    [diagnostics.error.name]: ({ key, ms, error, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      const outcome = error?.code === 'ERR_SNATCH_TIMEOUT' ? 'timeout' : 'error'
      if (start.method === 'lead' && outcome === 'timeout') {
        // A campaign not elected within its `retry`: it looks again; another replica leads, as it should.
        handlers[diagnostics.busy.name]({ key, ms, start })
        return
      }
      if (call.hold === undefined) metrics.acquisitions.add(1, labels(start, key, outcome))
      unheld(start, key)
      const span = call.hold ?? call.wait ?? call.attempt
      failed(api, span, error)
      span.end()
      calls.delete(start)
    },
    [diagnostics.attempt.name]: ({ schedule, ending, durationMs, instance, error, start }) => {
      if (only !== null && start?.locker !== only) return
      metrics.attempts.add(1, { 'redis_snatch.schedule': schedule, 'redis_snatch.ending': ending })
      const span = start && calls.get(start)?.attempt
      if (span === undefined) return
      span.setAttributes({ 'redis_snatch.ending': ending, 'redis_snatch.instance': instance, 'redis_snatch.duration_ms': durationMs })
      if (ending !== 'ok') failed(api, span, error)
      span.end()
      calls.delete(start)
    },
    [diagnostics.missed.name]: ({ schedule, reason, locker }) => {
      if (only !== null && locker !== only) return
      metrics.missed.add(1, { 'redis_snatch.schedule': schedule, 'redis_snatch.reason': reason })
    },
  }
  for (const [name, handler] of Object.entries(handlers)) dc.subscribe(name, handler)
  let on = true
  return {
    /** Turns it off: no span or metric point is recorded any more. */
    disable() {
      if (!on) return
      on = false
      for (const [name, handler] of Object.entries(handlers)) dc.unsubscribe(name, handler)
    },
  }
}

/** The metrics, named by OpenTelemetry's rules (durations in seconds). */
function instruments(meter) {
  return {
    acquisitions: meter.createCounter('redis_snatch.lock.acquisitions', {
      description: 'Attempts to take a lock, by outcome: acquired, busy (held by another), timeout, error',
      unit: '{acquisition}',
    }),
    wait: meter.createHistogram('redis_snatch.lock.wait.duration', {
      description: 'From a call to its lock acquired, or found held',
      unit: 's',
    }),
    hold: meter.createHistogram('redis_snatch.lock.hold.duration', {
      description: 'How long a lock was held, from its acquisition to its release or loss',
      unit: 's',
    }),
    held: meter.createUpDownCounter('redis_snatch.lock.held', {
      description: 'Locks held now by this process (runs, locks, permits, scheduled attempts)',
      unit: '{lock}',
    }),
    lost: meter.createCounter('redis_snatch.lock.lost', {
      description: 'Leases lost while held',
      unit: '{lease}',
    }),
    attempts: meter.createCounter('redis_snatch.schedule.attempts', {
      description: "Scheduled attempts run here, by how they ended: ok, failed, timeout, replaced, lost",
      unit: '{attempt}',
    }),
    lag: meter.createHistogram('redis_snatch.schedule.start_lag', {
      description: "From an occurrence's tick to its fn's call, here",
      unit: 's',
    }),
    missed: meter.createCounter('redis_snatch.schedule.missed', {
      description: 'Occurrences this process recorded missed, by reason: deadline, superseded, overlap, suspended',
      unit: '{occurrence}',
    }),
  }
}

/** Marks `span` failed with `error` (its code as `error.type`, and the exception). */
function failed(api, span, error) {
  const code = error?.code ?? (error instanceof Error ? error.name : 'Error')
  span.setAttribute('error.type', code)
  if (error instanceof Error) span.recordException(error)
  span.setStatus({ code: api.SpanStatusCode.ERROR, message: code })
}

module.exports = { instrument }
