'use strict'
// `require('redis-snatch/otel')`: OpenTelemetry traces and metrics of every locker in the process (or of one), from what
// redis-snatch publishes on diagnostics_channel (lib/diagnostics.js; the metrics as lib/call-metrics.js counts them).
// `@opentelemetry/api` is the user's (an optional peer dependency); the SDK, exporters and providers too. Off, it
// costs nothing: nothing subscribes.

const dc = require('node:diagnostics_channel')
const fs = require('node:fs')
const path = require('node:path')
const { performance } = require('node:perf_hooks')
const { CONTENTION, METRICS, RUNS, contentionByLabel, countCalls, labelSets } = require('./call-metrics')
const diagnostics = require('./diagnostics')
const { invalidArg } = require('./errors')
const { Locker } = require('./locker')
const { checkType, snapshot } = require('./options')

const api = requireApi()

const NAME = 'redis-snatch'
/**
 * The methods that make one attempt and never wait: a call of one gets a wait span only when it does not get its lock
 * (found held, or failed); once acquired, its hold span's `redis_snatch.wait_ms` says how long the attempt took.
 */
const ONE_ATTEMPT = new Set(['snatchTask', 'tryLock', 'tryAcquire'])
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
  /**
   * The spans of each call under way, on its `start` message (a property of this instrumentation's own: cheaper than
   * a WeakMap, whose entries every collection visits).
   */
  const CALL = Symbol('redis-snatch/otel call')
  const forget = (start) => (start[CALL] = undefined)

  /**
   * A wait span for the call of `start`, from `ms` ago (undefined: from now), in `parent`. (Ended at a time given on
   * the same clock: the SDK ends a span given its start time on Date.now() otherwise.)
   */
  const waitSpan = (start, parent, ms) => {
    const attributes = { 'redis_snatch.method': start.method, 'redis_snatch.key': start.key }
    const startTime = ms === undefined ? undefined : performance.now() - ms
    return tracer.startSpan('redis-snatch wait', { attributes, startTime }, parent)
  }
  /** The wait span of `call`: a one-attempt call's made now, from its start `ms` ago. */
  const waited = (call, start, ms) => call.wait ?? waitSpan(start, call.parent, ms)

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
        start[CALL] = { parent: api.ROOT_CONTEXT, attempt: span }
        start[diagnostics.WRAP] = (fn) => api.context.with(api.trace.setSpan(api.ROOT_CONTEXT, span), fn)
        return
      }
      // A one-attempt call has no wait: its wait span is made only if it does not get the lock (`waited`).
      const wait = ONE_ATTEMPT.has(start.method) ? undefined : waitSpan(start, parent)
      start[CALL] = { parent, wait }
    },
    [diagnostics.acquire.name]: ({ key, fence, ms, direct, start }) => {
      const call = start?.[CALL]
      if (call === undefined || start.method === 'schedule') return
      if (call.wait !== undefined) {
        call.wait.setAttribute('redis_snatch.outcome', 'acquired')
        call.wait.end()
      }
      const attributes = {
        'redis_snatch.method': start.method,
        'redis_snatch.key': key,
        'redis_snatch.fence': String(fence),
        'redis_snatch.direct': direct,
        'redis_snatch.wait_ms': ms,
      }
      call.hold = tracer.startSpan('redis-snatch hold', { attributes }, call.parent)
      start[diagnostics.WRAP] = (fn) => api.context.with(api.trace.setSpan(call.parent, call.hold), fn)
    },
    [diagnostics.busy.name]: ({ ms, start }) => {
      const call = start?.[CALL]
      if (call === undefined) return
      const wait = waited(call, start, ms)
      wait.setAttribute('redis_snatch.outcome', 'busy')
      wait.end(performance.now())
      forget(start)
    },
    [diagnostics.release.name]: ({ released, start }) => {
      const call = start?.[CALL]
      if (call?.hold === undefined) return
      call.hold.setAttribute('redis_snatch.released', released)
      call.hold.end()
      forget(start)
    },
    [diagnostics.lost.name]: ({ reason, start }) => {
      const call = start?.[CALL]
      if (call === undefined) return
      const span = call.hold ?? call.attempt
      span?.addEvent('redis-snatch lease lost', reason === undefined ? undefined : { 'redis_snatch.reason': reason })
      span?.setStatus({ code: api.SpanStatusCode.ERROR, message: 'ERR_SNATCH_LOCK_LOST' })
      if (!RUNS.has(start.method)) {
        // A lock the caller holds ends with its loss (a run's end follows it on the release channel).
        call.hold?.end()
        forget(start)
      }
    },
    [diagnostics.error.name]: ({ error, ms, start }) => {
      const call = start?.[CALL]
      if (call === undefined) return
      if (start.method === 'lead' && error?.code === 'ERR_SNATCH_TIMEOUT') {
        // A campaign not elected within its `retry`: it looks again; another replica leads, as it should.
        handlers[diagnostics.busy.name]({ ms, start })
        return
      }
      const span = call.hold ?? call.attempt ?? waited(call, start, ms)
      failed(api, span, error)
      span.end(performance.now())
      forget(start)
    },
    [diagnostics.attempt.name]: ({ ending, durationMs, instance, error, start }) => {
      const span = start?.[CALL]?.attempt
      if (span === undefined) return
      span.setAttributes({ 'redis_snatch.ending': ending, 'redis_snatch.instance': instance, 'redis_snatch.duration_ms': durationMs })
      if (ending !== 'ok') failed(api, span, error)
      span.end()
      forget(start)
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
 * key as an attribute when `keyOf` (not null) says. Histograms record each value; counters and up-down counters add
 * to running totals that observable instruments report on collection (`totalsOf`), which costs a call an addition
 * rather than the SDK's lookup of the attribute set.
 */
function recorder(meter, keyOf) {
  const totals = totalsOf(meter)
  const histograms = {}
  for (const [id, { name, instrument, unit, description }] of Object.entries(METRICS)) {
    if (instrument === 'histogram') histograms[id] = meter.createHistogram(name, { description, unit })
  }
  const known = labelSets((metric, values, label) => {
    const attributes = {}
    METRICS[metric].attributes.forEach((name, i) => (attributes[`redis_snatch.${name}`] = values[i]))
    if (label !== undefined) attributes['redis_snatch.key'] = label
    return { attributes, total: totals[metric]?.of(attributes) }
  })
  return (metric, value, values, key) => {
    const set = known(metric, values, key !== undefined && keyOf !== null ? String(keyOf(key)) : undefined)
    if (set.total === undefined) histograms[metric].record(value, set.attributes)
    else set.total.value += value
  }
}

/** The running totals of each meter's counters (`totalsOf`), shared by every `instrument()` on it. */
const meterTotals = new WeakMap()

/**
 * The running totals of `meter`'s counters and up-down counters, by metric id: `of(attributes)` the total of one
 * attribute set (`{ value }`, the same object for equal sets). Their observable instruments are made on first use and
 * report every total on collection, so that several `instrument()` calls on one meter add up (and a total stays once
 * disabled, as a counter's does).
 */
function totalsOf(meter) {
  let totals = meterTotals.get(meter)
  if (totals !== undefined) return totals
  totals = {}
  for (const [id, { name, instrument, unit, description }] of Object.entries(METRICS)) {
    if (instrument === 'histogram') continue
    /** Each attribute set's total, by the set's entries as JSON (made once per set, not per call). */
    const sets = new Map()
    const create = instrument === 'counter' ? 'createObservableCounter' : 'createObservableUpDownCounter'
    meter[create](name, { description, unit }).addCallback((result) => {
      for (const { attributes, value } of sets.values()) result.observe(value, attributes)
    })
    const of = (attributes) => {
      const id = JSON.stringify(Object.entries(attributes))
      let total = sets.get(id)
      if (total === undefined) sets.set(id, (total = { attributes, value: 0 }))
      return total
    }
    totals[id] = { of }
  }
  meterTotals.set(meter, totals)
  return totals
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
