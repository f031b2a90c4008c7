'use strict'
// `require('redis-snatch/otel')`: OpenTelemetry traces and metrics of every locker in the process (or of one), from what
// redis-snatch publishes on diagnostics_channel (lib/diagnostics.js; the metrics as lib/call-metrics.js counts them).
// `@opentelemetry/api` is the user's (an optional peer dependency); the SDK, exporters and providers too. Off, it
// costs nothing: nothing subscribes.

const dc = require('node:diagnostics_channel')
const fs = require('node:fs')
const path = require('node:path')
const { CONTENTION, METRICS, RUNS, contentionByLabel, countCalls, labelSets } = require('./call-metrics')
const diagnostics = require('./diagnostics')
const { invalidArg } = require('./errors')
const { Locker } = require('./locker')
const { checkType, snapshot } = require('./options')

const api = requireApi()

const NAME = 'redis-snatch'
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
  /** The spans of each call under way, by its `start` message. */
  const calls = new WeakMap()

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
    [diagnostics.acquire.name]: ({ key, fence, direct, start }) => {
      const call = start && calls.get(start)
      if (call === undefined || start.method === 'schedule') return
      call.wait.setAttribute('redis_snatch.outcome', 'acquired')
      call.wait.end()
      const attributes = { 'redis_snatch.method': start.method, 'redis_snatch.key': key, 'redis_snatch.fence': String(fence), 'redis_snatch.direct': direct }
      call.hold = tracer.startSpan('redis-snatch hold', { attributes }, call.parent)
      start[diagnostics.WRAP] = (fn) => api.context.with(api.trace.setSpan(call.parent, call.hold), fn)
    },
    [diagnostics.busy.name]: ({ start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      call.wait.setAttribute('redis_snatch.outcome', 'busy')
      call.wait.end()
      calls.delete(start)
    },
    [diagnostics.release.name]: ({ released, start }) => {
      const call = start && calls.get(start)
      if (call?.hold === undefined) return
      call.hold.setAttribute('redis_snatch.released', released)
      call.hold.end()
      calls.delete(start)
    },
    [diagnostics.lost.name]: ({ reason, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      const span = call.hold ?? call.attempt
      span?.addEvent('redis-snatch lease lost', reason === undefined ? undefined : { 'redis_snatch.reason': reason })
      span?.setStatus({ code: api.SpanStatusCode.ERROR, message: 'ERR_SNATCH_LOCK_LOST' })
      if (!RUNS.has(start.method)) {
        // A lock the caller holds ends with its loss (a run's end follows it on the release channel).
        call.hold?.end()
        calls.delete(start)
      }
    },
    [diagnostics.error.name]: ({ error, start }) => {
      const call = start && calls.get(start)
      if (call === undefined) return
      if (start.method === 'lead' && error?.code === 'ERR_SNATCH_TIMEOUT') {
        // A campaign not elected within its `retry`: it looks again; another replica leads, as it should.
        handlers[diagnostics.busy.name]({ start })
        return
      }
      const span = call.hold ?? call.wait ?? call.attempt
      failed(api, span, error)
      span.end()
      calls.delete(start)
    },
    [diagnostics.attempt.name]: ({ ending, durationMs, instance, error, start }) => {
      const span = start && calls.get(start)?.attempt
      if (span === undefined) return
      span.setAttributes({ 'redis_snatch.ending': ending, 'redis_snatch.instance': instance, 'redis_snatch.duration_ms': durationMs })
      if (ending !== 'ok') failed(api, span, error)
      span.end()
      calls.delete(start)
    },
  }
  for (const [name, handler] of Object.entries(handlers)) dc.subscribe(name, handler)
  const uncount = countCalls(only, recorder(meter, keyOf))
  const unobserve = keyOf === null ? () => {} : observeContention(meter, keyOf, only)
  let on = true
  return {
    /** Turns it off: no span or metric point is recorded any more. */
    disable() {
      if (!on) return
      on = false
      for (const [name, handler] of Object.entries(handlers)) dc.unsubscribe(name, handler)
      uncount()
      unobserve()
    },
  }
}

/**
 * The metrics of lib/call-metrics.js as OpenTelemetry instruments of `meter`: a `record` for countCalls, with a call's
 * key as an attribute when `keyOf` (not null) says.
 */
function recorder(meter, keyOf) {
  const instruments = {}
  for (const [id, { name, instrument, unit, description }] of Object.entries(METRICS)) {
    const create = { counter: 'createCounter', histogram: 'createHistogram', updown: 'createUpDownCounter' }[instrument]
    instruments[id] = meter[create](name, { description, unit })
  }
  const attributesOf = (metric, values) => {
    const attributes = {}
    METRICS[metric].attributes.forEach((name, i) => (attributes[`redis_snatch.${name}`] = values[i]))
    return attributes
  }
  const known = labelSets(attributesOf)
  return (metric, value, values, key) => {
    let attributes = known(metric, values)
    if (key !== undefined && keyOf !== null) attributes = { ...attributes, 'redis_snatch.key': String(keyOf(key)) }
    if (METRICS[metric].instrument === 'histogram') instruments[metric].record(value, attributes)
    else instruments[metric].add(value, attributes)
  }
}

/**
 * The keys waited for most (`locker.contention()`) as observable gauges of `meter` (lib/call-metrics.js's
 * CONTENTION), with their label `keyOf(key)` as `redis_snatch.key`: of `only`, or of every locker seen calling since.
 * Returns a function that stops it.
 */
function observeContention(meter, keyOf, only) {
  /** The lockers seen (held weakly), when not `only`. */
  const seen = new WeakSet()
  const lockers = new Set()
  const onStart = ({ locker }) => {
    if (seen.has(locker)) return
    seen.add(locker)
    lockers.add(new WeakRef(locker))
  }
  if (only === null) dc.subscribe(diagnostics.start.name, onStart)
  const live = () => {
    if (only !== null) return [only]
    const alive = []
    for (const ref of lockers) {
      const locker = ref.deref()
      if (locker === undefined) lockers.delete(ref)
      else alive.push(locker)
    }
    return alive
  }
  const gauges = Object.entries(CONTENTION).map(([id, { name, unit, description }]) => {
    const gauge = meter.createObservableGauge(name, { description, unit })
    const observe = (result) => {
      // One point per label: the lockers' keys of one label summed.
      const byLabel = new Map()
      for (const locker of live()) {
        for (const [key, sum] of contentionByLabel(locker, keyOf)) byLabel.set(key, (byLabel.get(key) ?? 0) + sum[id])
      }
      for (const [key, value] of byLabel) result.observe(id === 'waitMs' ? value / 1000 : value, { 'redis_snatch.key': key })
    }
    gauge.addCallback(observe)
    return () => gauge.removeCallback(observe)
  })
  return () => {
    if (only === null) dc.unsubscribe(diagnostics.start.name, onStart)
    for (const stop of gauges) stop()
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
