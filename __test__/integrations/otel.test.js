'use strict'
// redis-snatch/otel with the real OpenTelemetry SDK (sdk-trace-base's in-memory exporter, sdk-metrics read on demand,
// the async-hooks context manager): the spans of a waiting withLock inside a parent span, a snatchTask that loses, a
// scheduled occurrence retried once, a lease lost; the metric points and their units; nothing once turned off.

const api = require('@opentelemetry/api')
const { AsyncLocalStorageContextManager } = require('@opentelemetry/context-async-hooks')
const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base')
const {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} = require('@opentelemetry/sdk-metrics')
const { createLocker } = require('../..')
const { instrument } = require('redis-snatch/otel')
const { redisCommand } = require('../support/redis-server')
const { next, uniqueKey, until } = require('../support/util')

const spans = new InMemorySpanExporter()
const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(spans)] })
const reader = new PeriodicExportingMetricReader({
  exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
  exportIntervalMillis: 3_600_000,
})
const meterProvider = new MeterProvider({ readers: [reader] })
const tracer = tracerProvider.getTracer('test')

const prefix = `${uniqueKey('otel')}:`
let locker
let other
let instrumentation
beforeAll(() => {
  api.context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  instrumentation = instrument({ tracerProvider, meterProvider })
  locker = createLocker({ url: process.env.REDIS_URL, prefix })
  other = createLocker({ url: process.env.REDIS_URL, prefix })
})
afterAll(async () => {
  instrumentation.disable()
  api.context.disable()
  await Promise.all([locker.close(), other.close()])
})
beforeEach(() => spans.reset())

/** The finished spans named `name`. */
const named = (name) => spans.getFinishedSpans().filter((span) => span.name === name)

/** The data points of metric `name` (cumulative), with its unit. */
async function points(name) {
  const { resourceMetrics } = await reader.collect()
  const metric = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics).find((m) => m.descriptor.name === name)
  return { unit: metric?.descriptor.unit, points: metric?.dataPoints ?? [] }
}

/** The sum of a counter's points whose attributes include `match`. */
async function count(name, match) {
  const { points: all } = await points(name)
  return all.filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v)).reduce((n, p) => n + p.value, 0)
}

test('a waiting withLock: its wait and hold spans are children of the caller\'s span, and fn\'s spans of the hold', async () => {
  const key = uniqueKey('wait')
  const blocker = await other.tryLock(key, { ttl: 10_000 })
  // Released once the withLock waits (it marked the blocker's token as waited for), at a time on the spans' clock.
  let releasedAt
  const waiting = async () => (await redisCommand(process.env.REDIS_URL, 'GET', `${prefix}${key}`))?.endsWith('*')
  const released = until(waiting, 'the withLock to wait').then(() => {
    releasedAt = performance.timeOrigin + performance.now()
    return blocker.release()
  })
  const fence = await tracer.startActiveSpan('request', async (request) => {
    const fence = await locker.withLock(
      key,
      async (ctx) => {
        tracer.startSpan('inner').end()
        return ctx.fence
      },
      { wait: 5000 },
    )
    request.end()
    return fence
  })
  const [request] = named('request')
  const ours = (s) => s.attributes['redis_snatch.key'] === key && s.attributes['redis_snatch.method'] === 'withLock'
  const [wait] = named('redis-snatch wait').filter(ours)
  const [hold] = named('redis-snatch hold').filter(ours)
  const [inner] = named('inner')
  expect(wait.parentSpanContext.spanId).toBe(request.spanContext().spanId)
  expect(hold.parentSpanContext.spanId).toBe(request.spanContext().spanId)
  expect(inner.parentSpanContext.spanId).toBe(hold.spanContext().spanId)
  expect(wait.attributes).toMatchObject({ 'redis_snatch.method': 'withLock', 'redis_snatch.outcome': 'acquired' })
  expect(hold.attributes).toMatchObject({ 'redis_snatch.fence': String(fence), 'redis_snatch.released': true })
  // It waited for the blocker's release: its wait span ended after it.
  await released
  // (Within 1 ms: the SDK's hrtime conversion of the same clock rounds; 0.02 ms off was seen on a busy machine.)
  expect(wait.endTime[0] * 1000 + wait.endTime[1] / 1e6).toBeGreaterThanOrEqual(releasedAt - 1)
})

test('a snatchTask that loses: its wait span says busy, and the acquisitions metric counts it', async () => {
  const key = uniqueKey('busy')
  const before = await count('redis_snatch.lock.acquisitions', { 'redis_snatch.outcome': 'busy' })
  const blocker = await other.tryLock(key, { ttl: 10_000 })
  const calledAt = performance.timeOrigin + performance.now()
  expect((await locker.snatchTask(key, () => 1)).ran).toBe(false)
  await blocker.release()
  const [wait] = named('redis-snatch wait').filter((s) => s.attributes['redis_snatch.method'] === 'snatchTask')
  expect(wait.attributes['redis_snatch.outcome']).toBe('busy')
  // Made once the key was found held, it starts when the call did.
  const ms = (time) => time[0] * 1000 + time[1] / 1e6
  expect(ms(wait.endTime)).toBeGreaterThan(ms(wait.startTime))
  expect(ms(wait.startTime)).toBeGreaterThanOrEqual(calledAt - 1)
  expect(named('redis-snatch hold').filter((s) => s.attributes['redis_snatch.method'] === 'snatchTask')).toEqual([])
  expect(await count('redis_snatch.lock.acquisitions', { 'redis_snatch.outcome': 'busy' })).toBe(before + 1)
})

test('a snatchTask that wins: no wait span, its hold span (a child of the caller\'s) says how long the attempt took', async () => {
  const key = uniqueKey('won')
  const before = performance.now()
  await tracer.startActiveSpan('request', async (request) => {
    await locker.snatchTask(key, () => tracer.startSpan('inner').end())
    request.end()
  })
  const took = performance.now() - before
  const ours = (s) => s.attributes['redis_snatch.key'] === key
  expect(named('redis-snatch wait').filter(ours)).toEqual([])
  const [hold] = named('redis-snatch hold').filter(ours)
  const [request] = named('request')
  expect(hold.parentSpanContext.spanId).toBe(request.spanContext().spanId)
  expect(named('inner')[0].parentSpanContext.spanId).toBe(hold.spanContext().spanId)
  expect(hold.attributes['redis_snatch.wait_ms']).toBeGreaterThan(0)
  expect(hold.attributes['redis_snatch.wait_ms']).toBeLessThan(took)
})

test('a scheduled occurrence retried once: two attempt spans, the first failed with its error code', async () => {
  const name = uniqueKey('retried')
  let calls = 0
  const task = locker.schedule(
    name,
    '* * * * * *',
    async () => {
      tracer.startSpan('job step').end()
      calls++
      if (calls === 1) throw Object.assign(new Error('first fails'), { code: 'E_FIRST' })
    },
    { retries: 1, retryDelay: 100 },
  )
  task.on('error', () => {})
  await next(task, 'run', ({ attempt }) => attempt === 2)
  await task.stop()
  const attempts = named('redis-snatch attempt').filter((s) => s.attributes['redis_snatch.schedule'] === name)
  const [first, second] = attempts.sort((a, b) => a.attributes['redis_snatch.attempt'] - b.attributes['redis_snatch.attempt'])
  expect(first.attributes).toMatchObject({ 'redis_snatch.attempt': 1, 'redis_snatch.why': 'on-time', 'redis_snatch.ending': 'failed', 'error.type': 'E_FIRST' })
  expect(first.status.code).toBe(api.SpanStatusCode.ERROR)
  expect(second.attributes).toMatchObject({ 'redis_snatch.attempt': 2, 'redis_snatch.why': 'retry', 'redis_snatch.ending': 'ok' })
  expect(second.status.code).not.toBe(api.SpanStatusCode.ERROR)
  expect(second.attributes['redis_snatch.tick']).toBe(first.attributes['redis_snatch.tick'])
  // The job's own spans sit inside its attempt's.
  const steps = named('job step').map((s) => s.parentSpanContext.spanId)
  expect(steps.sort()).toEqual([first.spanContext().spanId, second.spanContext().spanId].sort())
  expect(await count('redis_snatch.schedule.attempts', { 'redis_snatch.schedule': name, 'redis_snatch.ending': 'failed' })).toBe(1)
  expect(await count('redis_snatch.schedule.attempts', { 'redis_snatch.schedule': name, 'redis_snatch.ending': 'ok' })).toBe(1)
  const lag = await points('redis_snatch.schedule.start_lag')
  expect(lag.unit).toBe('s')
  expect(lag.points.find((p) => p.attributes['redis_snatch.schedule'] === name).value.count).toBe(2)
})

test('a lease lost: the hold span has the loss, the lost metric counts it', async () => {
  const key = uniqueKey('lost')
  const before = await count('redis_snatch.lock.lost', {})
  const err = await locker
    .withLock(key, async ({ signal }) => {
      await other.forceRelease(key)
      await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
    }, { ttl: 1500 })
    .catch((e) => e)
  expect(err.code).toBe('ERR_SNATCH_LOCK_LOST')
  const [hold] = named('redis-snatch hold').filter((s) => s.attributes['redis_snatch.key'] === key)
  expect(hold.events.map((e) => e.name)).toContain('redis-snatch lease lost')
  expect(hold.status).toMatchObject({ code: api.SpanStatusCode.ERROR })
  expect(await count('redis_snatch.lock.lost', {})).toBe(before + 1)
})

test('the metrics have their units, no key label by default, and the held gauge goes back to 0', async () => {
  const key = uniqueKey('units')
  await locker.withLock(key, () => 1)
  const lock = await locker.tryLock(uniqueKey('held'))
  await lock.release()
  for (const [name, unit] of [
    ['redis_snatch.lock.acquisitions', '{acquisition}'],
    ['redis_snatch.lock.wait.duration', 's'],
    ['redis_snatch.lock.hold.duration', 's'],
    ['redis_snatch.lock.held', '{lock}'],
  ]) {
    const { unit: actual, points: all } = await points(name)
    expect(actual).toBe(unit)
    expect(all.every((p) => !('redis_snatch.key' in p.attributes))).toBe(true)
  }
  const held = (await points('redis_snatch.lock.held')).points.reduce((n, p) => n + p.value, 0)
  expect(held).toBe(0)
})

test('the error of a call is recorded with its code; nothing is recorded once turned off', async () => {
  const key = uniqueKey('timeout')
  const blocker = await other.tryLock(key, { ttl: 10_000 })
  await expect(locker.withLock(key, () => 1, { wait: 50 })).rejects.toMatchObject({ code: 'ERR_SNATCH_TIMEOUT' })
  const [wait] = named('redis-snatch wait').filter((s) => s.attributes['redis_snatch.method'] === 'withLock' && s.attributes['redis_snatch.key'] === key)
  expect(wait.attributes['error.type']).toBe('ERR_SNATCH_TIMEOUT')
  expect(await count('redis_snatch.lock.acquisitions', { 'redis_snatch.outcome': 'timeout' })).toBeGreaterThanOrEqual(1)
  await blocker.release()

  instrumentation.disable()
  const acquired = await count('redis_snatch.lock.acquisitions', {})
  spans.reset()
  await locker.withLock(uniqueKey('off'), () => 1)
  expect(spans.getFinishedSpans()).toEqual([])
  expect(await count('redis_snatch.lock.acquisitions', {})).toBe(acquired)
  instrumentation = instrument({ tracerProvider, meterProvider })
})

test('keyLabel: a per-order key leaves the series bounded by default; a function of the key labels the metrics', async () => {
  // 10,000 distinct keys locked with the default settings: one series per method and outcome, whatever the keys.
  const keys = Array.from({ length: 10_000 }, (_, i) => `order:${i}:${process.pid}`)
  for (let i = 0; i < keys.length; i += 500) await Promise.all(keys.slice(i, i + 500).map((key) => locker.snatchTask(key, () => 1)))
  expect((await points('redis_snatch.lock.acquisitions')).points.length).toBeLessThanOrEqual(8)
  expect((await points('redis_snatch.lock.hold.duration')).points.length).toBeLessThanOrEqual(8)

  const labelledReader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  })
  const byPrefix = instrument({
    meterProvider: new MeterProvider({ readers: [labelledReader] }),
    tracerProvider,
    keyLabel: (key) => key.split(':')[0],
  })
  await locker.withLock(`order:${process.pid}`, () => 1)
  byPrefix.disable()
  const { resourceMetrics } = await labelledReader.collect()
  const metrics = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)
  const acquisitions = metrics.find((m) => m.descriptor.name === 'redis_snatch.lock.acquisitions')
  expect(acquisitions.dataPoints.map((p) => p.attributes['redis_snatch.key'])).toEqual(['order'])
}, 60_000)

test('keyLabel: the keys waited for most as gauges labelled by key; none without a key label', async () => {
  const waiter = createLocker({ url: process.env.REDIS_URL, prefix })
  const key = `order:${uniqueKey('contended')}`
  const held = await other.lock(key)
  const labelledReader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  })
  const byPrefix = instrument({ meterProvider: new MeterProvider({ readers: [labelledReader] }), tracerProvider, keyLabel: (k) => k.split(':')[0] })
  expect((await waiter.withLock(key, () => 1, { wait: 50 }).catch((e) => e)).code).toBe('ERR_SNATCH_TIMEOUT')
  const { resourceMetrics } = await labelledReader.collect()
  byPrefix.disable()
  const metrics = resourceMetrics.scopeMetrics.flatMap((scope) => scope.metrics)
  const point = (name) => metrics.find((m) => m.descriptor.name === name)?.dataPoints.find((p) => p.attributes['redis_snatch.key'] === 'order')
  expect(point('redis_snatch.lock.contention.timeouts').value).toBeGreaterThanOrEqual(1)
  expect(point('redis_snatch.lock.contention.waits').value).toBeGreaterThanOrEqual(1)
  expect(point('redis_snatch.lock.contention.wait').value).toBeGreaterThanOrEqual(0.04)
  // The instrumentation without keyLabel has no such gauge.
  expect((await points('redis_snatch.lock.contention.waits')).points).toEqual([])
  await held.release()
  await waiter.close()
})

test("a leader's term is a hold span of method lead; a follower's campaign that is not elected is busy, not an error", async () => {
  const name = uniqueKey('lead')
  const busy = () => count('redis_snatch.lock.acquisitions', { 'redis_snatch.method': 'lead', 'redis_snatch.outcome': 'busy' })
  const before = await busy()
  const term = ({ signal }) => new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }))
  const leader = locker.lead(name, term)
  await next(leader, 'elected')
  const follower = other.lead(name, term, { retry: 50 })
  await until(async () => (await busy()) >= before + 2, 'the follower to find the lock held twice')
  const elected = next(follower, 'elected') // (told as soon as the leader's lock is given back)
  await leader.stop()
  await elected
  await follower.stop()
  const ours = (s) => s.attributes['redis_snatch.key'] === name
  const holds = named('redis-snatch hold').filter(ours)
  expect(holds.map((s) => s.attributes['redis_snatch.method'])).toEqual(['lead', 'lead'])
  const waits = named('redis-snatch wait').filter(ours)
  expect(waits.filter((s) => s.attributes['redis_snatch.outcome'] === 'busy').length).toBeGreaterThanOrEqual(2)
  expect(waits.every((s) => s.status.code !== api.SpanStatusCode.ERROR)).toBe(true)
  expect(await count('redis_snatch.lock.acquisitions', { 'redis_snatch.method': 'lead', 'redis_snatch.outcome': 'timeout' })).toBe(0)
})

test('locker: only that Locker\'s calls are recorded', async () => {
  const key = uniqueKey('only')
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  })
  const onlyOther = instrument({ meterProvider: new MeterProvider({ readers: [reader] }), tracerProvider, locker: other })
  try {
    await locker.withLock(key, () => 1)
    await other.withLock(key, () => 1)
    await other.withLock(key, () => 1)
  } finally {
    onlyOther.disable()
  }
  const { resourceMetrics } = await reader.collect()
  const acquisitions = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'redis_snatch.lock.acquisitions')
  expect(acquisitions.dataPoints.reduce((n, p) => n + p.value, 0)).toBe(2)
  expect(() => instrument({ locker: {} })).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
})

test('two instrumentations on one meter provider add up in its counters', async () => {
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 3_600_000,
  })
  const provider = new MeterProvider({ readers: [reader] })
  const both = [instrument({ meterProvider: provider, tracerProvider, locker }), instrument({ meterProvider: provider, tracerProvider, locker: other })]
  try {
    await locker.withLock(uniqueKey('both'), () => 1)
    await other.withLock(uniqueKey('both'), () => 1)
  } finally {
    for (const on of both) on.disable()
  }
  const { resourceMetrics } = await reader.collect()
  const acquisitions = resourceMetrics.scopeMetrics.flatMap((s) => s.metrics).find((m) => m.descriptor.name === 'redis_snatch.lock.acquisitions')
  expect(acquisitions.dataPoints.map((p) => [p.attributes['redis_snatch.method'], p.value])).toEqual([['withLock', 2]])
})
