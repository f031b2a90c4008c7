// Run by the pack test inside its temp project: `import` of redis-snatch as an ES module user would, then one real
// snatchTask against REDIS_URL. argv: the JSON list of value names index.d.ts declares, and a JSON object of the value
// names each subpath without peer dependencies declares ({ './dashboard': [...], ... }).
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import * as esm from 'redis-snatch'
import { snatchTask, createLocker } from 'redis-snatch'
import { createDashboard } from 'redis-snatch/dashboard'
import * as fence from 'redis-snatch/fence'
import http from 'node:http'

const declared = JSON.parse(process.argv[2])
const subpaths = JSON.parse(process.argv[3])
const cjs = createRequire(import.meta.url)('redis-snatch')

assert.match(import.meta.resolve('redis-snatch'), /\/node_modules\/redis-snatch\/index\.mjs$/)
console.log('  import: resolves to node_modules/redis-snatch/index.mjs')

assert.deepEqual(Object.keys(esm).sort(), declared)
for (const name of declared) assert.equal(esm[name], cjs[name], `${name} differs between import and require`)
console.log(`  import: exports exactly the ${declared.length} values index.d.ts declares, the same objects as require`)

const fenceCjs = createRequire(import.meta.url)('redis-snatch/fence')
assert.match(import.meta.resolve('redis-snatch/fence'), /\/node_modules\/redis-snatch\/lib\/entries\/fence\.mjs$/)
for (const name of ['fenced', 'fenceTableSql', 'StaleFenceError']) assert.equal(fence[name], fenceCjs[name], `redis-snatch/fence ${name}`)
console.log("  import: 'redis-snatch/fence' resolves to lib/entries/fence.mjs, the same objects as require")

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

// Each subpath's ES module entry: exactly the values its types declare, the same objects as require() gives.
for (const [subpath, names] of Object.entries(subpaths)) {
  const specifier = `redis-snatch${subpath.slice(1)}`
  const esmEntry = await import(specifier)
  const cjsEntry = createRequire(import.meta.url)(specifier)
  assert.deepEqual(Object.keys(esmEntry).sort(), names, `${specifier}: import's names`)
  for (const name of names) assert.equal(esmEntry[name], cjsEntry[name], `${name} differs between import and require`)
}
const listed = Object.keys(subpaths).map((subpath) => `'redis-snatch${subpath.slice(1)}'`)
console.log(`  import: ${listed.join(', ')} export what their types declare, the same objects as require`)
