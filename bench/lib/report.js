'use strict'
// The markdown report: the machine, the floor, one table per scenario and concurrency, the targets; and the soak.

const { LIBS } = require('../libs')
const { KEYS_PER_LOOP, SCENARIOS } = require('./scenarios')
const { median } = require('./stats')

const MIB = 1024 * 1024
const PEERS = ['redlock', 'sesame', 'semaphore', 'helper']
const MIN_SOAK_SAMPLES = 10

const DESCRIPTIONS = {
  uncontended: 'own key per loop: acquire, release. A cycle is one acquire + release.',
  contended: 'one key for all loops, one attempt per cycle, released when won. "won/s" counts the successes.',
  withfn:
    'own key per loop: acquire, run an async fn that resolves at once, release (redis-snatch: `snatchTask`; ' +
    'Redlocks: `using`; the others: acquire, try/finally release).',
  newkeys:
    'withfn on a new key every cycle (`n<loop>:<cycle>`): neither the key nor its fence counter exists yet, as when an ' +
    'order, a job or an event is grabbed by its id.',
  handoff:
    'waiters on one key with the library\'s own wait/retry (redis-snatch: `lock(key, { wait })`). A cycle is one ' +
    'handoff, its latency the time from the holder\'s release call to the next holder\'s acquisition. ' +
    'The raw floor has no waiting and is not run.',
  cluster:
    `withfn on a Redis Cluster of 3 masters with a replica each: each loop cycles through ${KEYS_PER_LOOP} keys of ` +
    'its own, so the keys spread over the slots (and masters) and never contend. redis-snatch: ' +
    '`createLocker({ cluster: seeds })`, `snatchTask`; raw ioredis: `Redis.Cluster`, `SET NX PX` + the ' +
    'compare-and-delete script (`defineCommand`: EVALSHA, EVAL once per connection). Only the libraries that ' +
    'support deployments run here; redis CPU is the sum over the 6 nodes. No floor (redis-benchmark is run on the ' +
    'single server only).',
  'cluster-newkeys': 'newkeys on the Redis Cluster of the cluster scenario (redis CPU summed over its 6 nodes).',
  'cluster-valkey':
    'the cluster scenario on a Cluster of Valkey 9.1 servers (redis CPU summed over its 6 nodes): redis-snatch ' +
    'releases by the server\'s own `DELIFEQ` there; raw ioredis as on the Redis Cluster.',
  'cluster-redis8':
    'the cluster scenario on a Cluster of Redis 8 servers (redis CPU summed over its 6 nodes): redis-snatch releases ' +
    'by the server\'s own `DELEX … IFEQ` there; raw ioredis as on the Redis Cluster.',
  valkey:
    'withfn on one Valkey 9.1 server: redis-snatch releases by the server\'s own `DELIFEQ` there; raw ioredis keeps ' +
    'its script.',
  redis8:
    'withfn on one Redis 8 server: redis-snatch releases by the server\'s own `DELEX … IFEQ` there; raw ioredis ' +
    'keeps its script.',
  tls:
    `withfn on one redis-server over TLS: each loop cycles through ${KEYS_PER_LOOP} keys of its own, as on the ` +
    'cluster. redis-snatch: `createLocker({ url: \'rediss://…\', tls: { ca } })`, `snatchTask`; raw ioredis: ' +
    '`new Redis(url, { tls: { ca } })`, `SET NX PX` + EVALSHA. A TLS locker\'s one-attempt calls and releases take ' +
    'the direct connection, over TLS; the last row is the same locker on the same server\'s plaintext port (the ' +
    'direct connection without TLS). No floor.',
  'tls-redis8':
    'the tls scenario on a Redis 8 server: redis-snatch releases by the server\'s own `DELEX … IFEQ` there; raw ' +
    'ioredis keeps its script. The last row is the plaintext port.',
}

/** The median of each field over the repetitions of one library in one scenario; `{ error }` if one failed. */
function summarize(reps) {
  const failed = reps.find((r) => r.error)
  if (failed) return { error: failed.error.split('\n')[0] }
  const field = (name) => median(reps.map((r) => r[name]))
  const fields = ['perSecond', 'ok', 'seconds', 'p50', 'p99', 'p999', 'maxRss', 'nodeCpu', 'redisCpu']
  const summary = Object.fromEntries(fields.map((name) => [name, field(name)]))
  summary.okPerSecond = median(reps.map((r) => r.ok / r.seconds))
  return summary
}

/** SET + EVALSHA cycles per second that a floor row allows (one of each per cycle). */
function floorCycles(row) {
  return 1 / (1 / row.set.rps + 1 / row.evalsha.rps)
}

/** The whole report of a comparison run. */
function renderReport({ header, floor, results }) {
  const lines = [...header, '']
  if (floor) lines.push(...renderFloor(floor), '')
  for (const [scenario, byConcurrency] of Object.entries(results)) {
    for (const [concurrency, byLib] of Object.entries(byConcurrency)) {
      const floorRow = floor?.find((row) => row.pipeline === 1 && row.clients === Number(concurrency))
      lines.push(...renderScenario(scenario, Number(concurrency), byLib, floorRow), '')
      if (SCENARIOS[scenario]?.deployment?.startsWith('tls')) lines.push(...renderTlsComparison(byLib))
    }
  }
  lines.push(...renderTargets(results))
  return lines.join('\n') + '\n'
}

function renderFloor(floor) {
  const lines = [
    '## Floor: redis-benchmark on the same server',
    '',
    'SET and EVALSHA of the raw floor\'s compare-and-delete script; "cycles/s" is one SET plus one EVALSHA each, ' +
      'the bound for an acquire + release over non-pipelined connections.',
    '',
    '| clients | pipeline | SET/s | EVALSHA/s | cycles/s | SET p50/p99 ms | EVALSHA p50/p99 ms | redis CPU |',
    '|---:|---:|---:|---:|---:|---:|---:|---:|',
  ]
  for (const row of floor) {
    lines.push(
      cells([
        row.clients,
        row.pipeline,
        rate(row.set.rps),
        rate(row.evalsha.rps),
        rate(floorCycles(row)),
        `${ms(row.set.p50)} / ${ms(row.set.p99)}`,
        `${ms(row.evalsha.p50)} / ${ms(row.evalsha.p99)}`,
        cpu(median([row.set.redisCpu, row.evalsha.redisCpu])),
      ]),
    )
  }
  return lines
}

/**
 * One scenario's table at one concurrency: a row per library (medians), × raw ioredis, and × floor except in handoff
 * and the scenarios on deployments (the floor is of the single server).
 */
function renderScenario(scenario, concurrency, byLib, floorRow) {
  const handoff = scenario === 'handoff'
  const contended = scenario === 'contended'
  const floorColumn = !handoff && !SCENARIOS[scenario]?.deployment
  const raw = byLib.raw && summarize(byLib.raw)
  const lines = [`## ${scenario}, c=${concurrency}`, '', DESCRIPTIONS[scenario], '']
  const head = ['library', handoff ? 'handoffs/s' : 'cycles/s']
  if (contended) head.push('won/s')
  head.push('p50 ms', 'p99 ms', 'p99.9 ms', 'max RSS MiB', 'node CPU', 'node CPU µs/cycle', 'redis CPU')
  if (!handoff) head.push('× raw ioredis')
  if (floorColumn) head.push('× floor')
  lines.push(cells(head), cells(head.map((_, i) => (i === 0 ? '---' : '---:'))))
  for (const lib of LIBS) {
    if (!byLib[lib.id]) continue
    const s = summarize(byLib[lib.id])
    if (s.error) {
      lines.push(cells([lib.name, `error: ${s.error}`, ...head.slice(2).map(() => '')]))
      continue
    }
    const row = [lib.name, rate(s.perSecond)]
    if (contended) row.push(rate(s.okPerSecond))
    const cpuPerCycle = Math.round((s.nodeCpu / s.perSecond) * 1e6)
    row.push(ms(s.p50), ms(s.p99), ms(s.p999), mib(s.maxRss), cpu(s.nodeCpu), cpuPerCycle, cpu(s.redisCpu))
    if (!handoff) row.push(raw && !raw.error ? ratio(s.perSecond / raw.perSecond) : '—')
    if (floorColumn) row.push(floorRow ? ratio(s.perSecond / floorCycles(floorRow)) : '—')
    lines.push(cells(row))
  }
  return lines
}

/**
 * What TLS costs the direct connection: redis-snatch over TLS against the same locker on the plaintext port; nothing
 * when either is missing.
 */
function renderTlsComparison(byLib) {
  const tls = byLib.snatch && summarize(byLib.snatch)
  const plain = byLib['snatch-plain'] && summarize(byLib['snatch-plain'])
  if (!tls || tls.error || !plain || plain.error) return []
  return [
    `What TLS costs: redis-snatch over TLS ${rate(tls.perSecond)} cycles/s, p50 ${ms(tls.p50)} ms; on the same ` +
      `server's plaintext port ${rate(plain.perSecond)} cycles/s, p50 ${ms(plain.p50)} ms: TLS at ` +
      `${ratio(tls.perSecond / plain.perSecond)} of plaintext.`,
    '',
  ]
}

/** The targets against this run's medians (reported, not asserted). */
function renderTargets(results) {
  const get = (scenario, concurrency, id) => {
    const reps = results[scenario]?.[concurrency]?.[id]
    const s = reps && summarize(reps)
    return s && !s.error ? s : null
  }
  /** redis-snatch's cycles per second over raw ioredis' at c=50 in `scenario`; null unless both ran there. */
  const againstRaw = (scenario) => {
    const own = get(scenario, 50, 'snatch')
    const raw = get(scenario, 50, 'raw')
    return own && raw ? own.perSecond / raw.perSecond : null
  }
  const targets = []
  const snatch50 = get('withfn', 50, 'snatch')
  const peers50 = PEERS.map((id) => get('withfn', 50, id)).filter(Boolean)
  if (snatch50 && peers50.length) {
    const best = Math.max(...peers50.map((s) => s.perSecond))
    const r = snatch50.perSecond / best
    targets.push(['withfn c=50 ≥ 2.5× the best peer', ratio(r), r >= 2.5])
  }
  for (const [scenario, name, target = 1.5] of [
    ['cluster', 'cluster withfn c=50 ≥ 1.5× raw ioredis'],
    ['tls', 'TLS withfn c=50 ≥ 1.5× raw ioredis'],
    ['newkeys', 'new keys withfn c=50 ≥ 2.2× raw ioredis', 2.2],
    ['cluster-newkeys', 'cluster new keys withfn c=50 ≥ 2.2× raw ioredis', 2.2],
  ]) {
    const r = againstRaw(scenario)
    if (r !== null) targets.push([name, ratio(r), r >= target])
  }
  const handoff = get('handoff', 10, 'snatch')
  if (handoff) targets.push(['handoff p50 ≤ 1 ms', `${ms(handoff.p50)} ms`, handoff.p50 <= 1])
  // Tail latency and memory (issue 26): against raw ioredis in the same run, which counts as a peer for memory.
  for (const scenario of ['withfn', 'uncontended']) {
    const own = get(scenario, 50, 'snatch')
    const raw = get(scenario, 50, 'raw')
    if (own && raw) {
      const r = own.perSecond / raw.perSecond
      targets.push([`${scenario} c=50 ≥ 2.2× raw ioredis`, ratio(r), r >= 2.2])
      targets.push([`${scenario} c=50 p99 ≤ raw ioredis`, `${ms(own.p99)} vs ${ms(raw.p99)} ms`, own.p99 <= raw.p99])
    }
    const own1 = get(scenario, 1, 'snatch')
    const raw1 = get(scenario, 1, 'raw')
    if (own1 && raw1) {
      const met = own1.p50 <= raw1.p50 && own1.p99 <= raw1.p99
      targets.push([`${scenario} c=1 p50 and p99 ≤ raw ioredis`, `${ms(own1.p50)} / ${ms(own1.p99)} vs ${ms(raw1.p50)} / ${ms(raw1.p99)} ms`, met])
    }
  }
  // Issue 66: at least 3× raw ioredis in the same run, in every scenario that runs both at c=50.
  for (const scenario of Object.keys(results)) {
    const r = againstRaw(scenario)
    if (r !== null) targets.push([`${scenario} c=50 ≥ 3× raw ioredis`, ratio(r), r >= 3])
  }
  const rss = ['uncontended', 'contended', 'withfn'].flatMap((scenario) => {
    const own = get(scenario, 50, 'snatch')
    const peers = [...PEERS, 'raw'].map((id) => get(scenario, 50, id)).filter(Boolean)
    if (!own || !peers.length) return []
    const lightest = Math.min(...peers.map((s) => s.maxRss))
    const name = `${scenario} c=50 max RSS ≤ the lightest peer or raw ioredis`
    return [[name, `${mib(own.maxRss)} vs ${mib(lightest)} MiB`, own.maxRss <= lightest]]
  })
  targets.push(...rss)
  if (targets.length === 0) return []
  return [
    '## Targets (reported, not asserted)',
    '',
    '| target | this run | met |',
    '|---|---:|:---:|',
    ...targets.map(([name, value, met]) => cells([name, value, met ? 'yes' : 'no'])),
  ]
}

/** The soak report: throughput and RSS over time, and whether RSS grew. */
function renderSoak({ header, seconds, result }) {
  const { rss } = result
  const trend = rssTrend(rss)
  const thirds = `the median of the last third is ${mib(trend.last)} MiB against ${mib(trend.first)} MiB`
  const verdict = !trend.enough
    ? `cannot be judged from ${rss.length} samples (it takes ${MIN_SOAK_SAMPLES})`
    : trend.grew
      ? `**grew**: ${thirds}`
      : `did not grow: ${thirds}`
  return [
    ...header,
    '',
    `## Soak: redis-snatch withfn, c=50, ${seconds} s`,
    '',
    `${rate(result.perSecond)} cycles/s, p50 ${ms(result.p50)} ms, p99 ${ms(result.p99)} ms, ` +
      `node CPU ${cpu(result.nodeCpu)}, redis CPU ${cpu(result.redisCpu)}.`,
    '',
    `RSS: start ${mib(rss[0])} MiB, end ${mib(rss.at(-1))} MiB, max ${mib(Math.max(...rss))} MiB ` +
      `(peak RSS of the process ${mib(result.maxRss)} MiB). RSS ${verdict} ` +
      '(first 10% of the samples skipped as warmup; "grew" means by more than 5% and 2 MiB).',
    '',
    'RSS (MiB) each second:',
    '',
    '```',
    rss.map((bytes) => mib(bytes)).join(' '),
    '```',
    '',
  ].join('\n')
}

/** Median RSS of the first and last thirds of the samples after warmup, and whether it grew. */
function rssTrend(samples) {
  const kept = samples.slice(Math.ceil(samples.length / 10))
  const third = Math.max(1, Math.floor(kept.length / 3))
  const first = median(kept.slice(0, third))
  const last = median(kept.slice(-third))
  const enough = samples.length >= MIN_SOAK_SAMPLES
  return { first, last, enough, grew: last - first > Math.max(2 * MIB, 0.05 * first) }
}

const cells = (values) => `| ${values.join(' | ')} |`
const rate = (n) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : '—')
const ms = (n) => (Number.isFinite(n) ? (n < 10 ? n.toFixed(3) : n.toFixed(1)) : '—')
const cpu = (cores) => (Number.isFinite(cores) ? `${Math.round(cores * 100)}%` : '—')
const ratio = (n) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : '—')
const mib = (bytes) => (bytes / MIB).toFixed(1)

module.exports = { renderReport, renderSoak }
