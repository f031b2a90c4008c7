'use strict'
// What a Map in the old generation costs its values under set/delete churn (results:
// bench/results/2026-11-28-otel-gc.md): 50 entries in flight, each added, then deleted 50 additions later, each value
// with some objects of its own, for 2 s; the bytes scavenges promoted, summed from V8's --trace-gc-nvp lines.
//   node --expose-gc --trace-gc-nvp bench/experiments/gc/old-map.js map old | node bench/experiments/gc/old-map.js sum
// `map` or `table` (lib/id-table.js), `old` (collected twice first, so its table is in the old generation) or `young`.
// `overwrite` sets 50 fixed keys instead (no deletes, so no rehash).
const { IdTable } = require('../../../lib/id-table')

const [kind = 'map', age = 'old'] = process.argv.slice(2)

if (kind === 'sum') {
  let text = ''
  process.stdin.on('data', (chunk) => (text += chunk))
  process.stdin.on('end', () => {
    const promoted = [...text.matchAll(/gc=s .*?promoted=(\d+)/g)].map((m) => Number(m[1]))
    const sum = promoted.reduce((a, b) => a + b, 0)
    console.log(text.split('\n').filter((line) => line.startsWith('{')).join('\n'))
    console.log(`scavenges ${promoted.length}, promoted ${(sum / 1e6).toFixed(1)} MB`)
  })
} else {
  const table = kind === 'table' ? new IdTable() : new Map()
  for (let k = 1; k <= 50; k++) table.set(k, null)
  for (let k = 1; k <= 50; k++) table.delete(k)
  if (age === 'old') {
    globalThis.gc()
    globalThis.gc()
  }
  const inFlight = []
  let id = 0
  const until = Date.now() + 2000
  const turn = () => {
    for (let i = 0; i < 2000; i++) {
      const k = ++id
      const value = { k, own: Array.from({ length: 20 }, () => ({ k })) }
      if (kind === 'overwrite') {
        table.set(k % 50, value)
        continue
      }
      table.set(k, value)
      inFlight.push(k)
      if (inFlight.length > 50) table.delete(inFlight.shift())
    }
    if (Date.now() < until) setImmediate(turn)
    else console.log(JSON.stringify({ kind, age, entries: id }))
  }
  turn()
}
