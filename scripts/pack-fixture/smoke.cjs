'use strict'
// Run by the pack test inside its temp project: `require('redis-snatch')` as a CommonJS user would.
// argv: the host's platform name (e.g. linux-x64-gnu) and the JSON list of value names index.d.ts declares.

const assert = require('node:assert/strict')
const path = require('node:path')

const [platform, declared] = [process.argv[2], JSON.parse(process.argv[3])]
const snatch = require('redis-snatch')

assert.equal(require.resolve('redis-snatch'), path.join(__dirname, 'node_modules', 'redis-snatch', 'index.js'))
console.log('  require: resolves to node_modules/redis-snatch/index.js')

assert.deepEqual(Object.keys(snatch).sort(), declared)
console.log(`  require: exports exactly the ${declared.length} values index.d.ts declares`)

const addon = path.join(__dirname, 'node_modules', `redis-snatch-${platform}`, `redis-snatch.${platform}.node`)
const addons = Object.keys(require.cache).filter((file) => file.endsWith('.node'))
assert.deepEqual(addons, [addon])
console.log(`  require: the native module came from the redis-snatch-${platform} package`)

// redis-snatch/nest ships, and without NestJS installed (this project has none) says what it needs.
assert.throws(() => require('redis-snatch/nest'), {
  code: 'MODULE_NOT_FOUND',
  message: 'redis-snatch/nest needs @nestjs/common (a NestJS application has it): npm install @nestjs/common',
})
console.log("  require: 'redis-snatch/nest' ships, and names the NestJS package it needs when there is none")

// redis-snatch/otel too, for OpenTelemetry's API; redis-snatch/prometheus needs nothing more but for registerMetrics.
assert.throws(() => require('redis-snatch/otel'), {
  code: 'MODULE_NOT_FOUND',
  message: 'redis-snatch/otel needs @opentelemetry/api (an OpenTelemetry setup has it): npm install @opentelemetry/api',
})
const { createMetricsHandler, registerMetrics } = require('redis-snatch/prometheus')
assert.equal(typeof createMetricsHandler, 'function')
// Its registerMetrics takes the application's prom-client registry, and says so when there is no prom-client.
const locker = snatch.createLocker({ url: 'redis://127.0.0.1:1' })
assert.throws(() => registerMetrics(locker, {}), {
  code: 'MODULE_NOT_FOUND',
  message: 'registerMetrics of redis-snatch/prometheus needs prom-client (the registry is its): npm install prom-client',
})
locker.close()
console.log(
  "  require: 'redis-snatch/otel' names the package it needs when there is none; 'redis-snatch/prometheus' loads, " +
    'and its registerMetrics names prom-client',
)

// redis-snatch/fence loads without pg or mysql2 (the user's; this project has neither), with the main entry's class.
const fence = require('redis-snatch/fence')
assert.deepEqual(Object.keys(fence).sort(), ['StaleFenceError', 'fenceTableSql', 'fenced'])
assert.equal(fence.StaleFenceError, snatch.StaleFenceError)
assert.match(fence.fenceTableSql('postgres'), /^CREATE TABLE IF NOT EXISTS "snatch_fences"/)
console.log("  require: 'redis-snatch/fence' loads without a database driver, its StaleFenceError the main entry's")
