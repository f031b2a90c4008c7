// Run by the pack test inside its temp project: `import` of redis-snatch as an ES module user would, then one real
// snatchTask against REDIS_URL. argv: the JSON list of value names index.d.ts declares.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import * as esm from 'redis-snatch'
import { snatchTask } from 'redis-snatch'

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
