// Run by the pack test inside its temp project: `import` of redis-snatch as an ES module user would, then one real
// snatchTask against REDIS_URL. argv: the JSON list of value names index.d.ts declares.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import * as esm from 'redis-snatch'
import { snatchTask, createLocker } from 'redis-snatch'
import { createDashboard } from 'redis-snatch/dashboard'
import http from 'node:http'

const declared = JSON.parse(process.argv[2])
const cjs = createRequire(import.meta.url)('redis-snatch')

assert.match(import.meta.resolve('redis-snatch'), /\/node_modules\/redis-snatch\/index\.mjs$/)
console.log('  import: resolves to node_modules/redis-snatch/index.mjs')

assert.deepEqual(Object.keys(esm).sort(), declared)
for (const name of declared) assert.equal(esm[name], cjs[name], `${name} differs between import and require`)
console.log(`  import: exports exactly the ${declared.length} values index.d.ts declares, the same objects as require`)

const key = `pack-test:${process.pid}:${Date.now()}`
const result = await snatchTask(key, ({ fence }) => `ran with fence ${fence}`)
assert.equal(result.ran, true)
assert.equal(typeof result.fence, 'bigint')
assert.equal(result.value, `ran with fence ${result.fence}`)
console.log(`  import: snatchTask('${key}') against ${process.env.REDIS_URL} resolved { ran: true }`)

// The dashboard: its page, script and style ship in the package, and its state comes from Redis.
const locker = createLocker()
const server = http.createServer(createDashboard(locker))
await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
const base = `http://127.0.0.1:${server.address().port}/`
for (const asset of ['', 'page.js', 'page.css']) assert.equal((await fetch(base + asset)).status, 200, `dashboard ${asset}`)
assert.equal((await (await fetch(`${base}api/state`)).json()).ok, true)
server.close()
await locker.close()
console.log("  import: 'redis-snatch/dashboard' serves its page and its state")
