'use strict'
// The libraries under comparison, in the order they run and are listed. `raw` is the floor; `pkg` names the npm
// package whose installed version the report shows; `wait: false` marks adapters without a waiting acquire (no
// handoff scenario); `deployments: true` marks adapters that can run on a deployment (a scenario's `deployment`:
// cluster, TLS), which the others skip; `scenarios` limits an entry to those scenarios, `with` selects it whenever
// that library is selected, and `plaintext: true` sends it to the deployment's plaintext port; a `reference` runs
// only when named with --libs; `options` are passed to its adapter.

const LIBS = [
  { id: 'snatch', name: 'redis-snatch', module: './redis-snatch', deployments: true },
  { id: 'redlock', name: 'redlock', pkg: 'redlock', module: './redlock' },
  { id: 'sesame', name: '@sesamecare-oss/redlock', pkg: '@sesamecare-oss/redlock', module: './sesamecare-redlock' },
  { id: 'semaphore', name: 'redis-semaphore Mutex', pkg: 'redis-semaphore', module: './redis-semaphore' },
  { id: 'helper', name: 'node-redis helper', pkg: 'redis', module: './node-redis-helper' },
  { id: 'raw', name: 'raw ioredis', pkg: 'ioredis', module: './ioredis-raw', wait: false, deployments: true },
  {
    // The TLS scenarios' reference: the same server's plaintext port, where one-attempt calls use the direct
    // connection (a TLS locker uses its main connection).
    id: 'snatch-plain',
    name: 'redis-snatch, plaintext port (direct connection)',
    module: './redis-snatch',
    deployments: true,
    plaintext: true,
    scenarios: ['tls', 'tls-redis8'],
    with: 'snatch',
  },
  {
    // Another build of redis-snatch (a checkout at an earlier commit, built there), for interleaved before/after
    // runs: `SNATCH_BASE=../base npm run bench -- --libs snatch,snatch-base --scenarios withfn,uncontended`.
    id: 'snatch-base',
    name: `redis-snatch at ${process.env.SNATCH_BASE || 'SNATCH_BASE (unset)'}`,
    module: './redis-snatch',
    options: { base: true },
    deployments: true,
    reference: true,
  },
  {
    // redis-snatch with OpenTelemetry on (redis-snatch/otel, the SDK's providers exporting nowhere): what tracing and
    // metrics cost. `npm run bench -- --libs snatch,snatch-otel --scenarios withfn,uncontended`.
    id: 'snatch-otel',
    name: 'redis-snatch with OpenTelemetry on',
    module: './redis-snatch',
    options: { otel: true },
    reference: true,
  },
  {
    // The build at SNATCH_BASE with OpenTelemetry on, as snatch-otel: what a change to redis-snatch/otel gains,
    // interleaved: `SNATCH_BASE=../base npm run bench -- --libs snatch-otel,snatch-base-otel,raw-otel --scenarios withfn`.
    id: 'snatch-base-otel',
    name: `redis-snatch at ${process.env.SNATCH_BASE || 'SNATCH_BASE (unset)'} with OpenTelemetry on`,
    module: './redis-snatch',
    options: { base: true, otel: true },
    reference: true,
  },
  {
    // Raw ioredis with OpenTelemetry on as its users have it (@opentelemetry/instrumentation-ioredis, a span per
    // command; the same SDK, exporter and sampler as snatch-otel): `--libs snatch-otel,raw-otel --scenarios withfn`.
    id: 'raw-otel',
    name: 'raw ioredis with @opentelemetry/instrumentation-ioredis on',
    pkg: '@opentelemetry/instrumentation-ioredis',
    module: './ioredis-raw-otel',
    wait: false,
    reference: true,
  },
  {
    // redis-snatch with prom-client metrics on (redis-snatch/prometheus's registerMetrics into a Registry never
    // scraped): what this process's metrics cost. `npm run bench -- --libs snatch,snatch-prom --scenarios withfn`.
    id: 'snatch-prom',
    name: 'redis-snatch with prom-client metrics on',
    module: './redis-snatch',
    options: { prom: true },
    reference: true,
  },
  {
    id: 'scripts-js',
    name: 'redis-snatch scripts on node-redis (reference)',
    module: './snatch-scripts-js',
    wait: false,
    reference: true,
  },
  {
    id: 'uv',
    name: 'redis-snatch scripts on a libuv-polled socket (experiment)',
    module: './uv-transport',
    wait: false,
    reference: true,
  },
  {
    id: 'uv-task',
    name: 'the same, a Tokio task per lease (experiment)',
    module: './uv-transport',
    options: { supervision: 'task' },
    wait: false,
    reference: true,
  },
  {
    id: 'uv-table',
    name: 'the same, one table of leases (experiment)',
    module: './uv-transport',
    options: { supervision: 'table' },
    wait: false,
    reference: true,
  },
]

/** The adapter of library `id`: `{ tryAcquire, release, withFn, acquireWait?, close }`. */
async function createAdapter(id, options) {
  const lib = LIBS.find((l) => l.id === id)
  if (!lib) throw new Error(`unknown library ${id}`)
  return require(lib.module).create({ ...options, ...lib.options })
}

module.exports = { LIBS, createAdapter }
