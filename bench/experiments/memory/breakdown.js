'use strict'
// What a benchmark worker's resident memory is: runs one library's withfn loop (the bench's adapter and scenario) at
// concurrency C for D ms, then, still loaded, sums /proc/self/smaps by what each mapping holds and prints it with
// V8's heap figures. Linux only. Run from the package root after `npm run build`:
//   REDIS_URL=redis://127.0.0.1:6379 node bench/experiments/memory/breakdown.js snatch 50 5000
// (library ids as in `npm run bench -- --help`: snatch, raw, helper, semaphore, …). Results: bench/README.md
// ("Tail latency", what the memory is).
const fs = require('node:fs')
const v8 = require('node:v8')
const { createAdapter } = require('../../libs')
const { measure } = require('../../lib/measure')
const { SCENARIOS } = require('../../lib/scenarios')

const [id = 'snatch', conc = '50', ms = '5000', scenario = 'withfn'] = process.argv.slice(2)
const MiB = 1024 * 1024

/** Resident kB per mapping of this process, each with its path (or '' for anonymous memory) and size in kB. */
function mappings() {
  const out = []
  let current = null
  for (const line of fs.readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \S+\s*(.*)$/.exec(line)
    if (head) {
      current = { path: head[1], size: 0, rss: 0 }
      out.push(current)
    } else if (current && line.startsWith('Size:')) current.size = Number(line.split(/\s+/)[1])
    else if (current && line.startsWith('Rss:')) current.rss = Number(line.split(/\s+/)[1])
  }
  return out
}

/** What a mapping holds, by its path; anonymous memory is split by V8's own account below. */
function kind({ path }) {
  if (path.endsWith('.node')) return 'our native module (.node), mapped'
  if (path === process.execPath || path.endsWith('/node')) return 'node binary, mapped'
  if (path.includes('.so')) return 'shared libraries, mapped'
  if (path === '[heap]') return 'brk heap (glibc malloc)'
  if (path === '[stack]') return 'main thread stack'
  if (path === '') return 'anonymous'
  return `other ${path}`
}

async function main() {
  const lib = await createAdapter(id, { url: process.env.REDIS_URL, prefix: `mem${process.pid}:`, ttl: 30_000 })
  const summary = await measure({ scenario, concurrency: Number(conc), warmupMs: 1000, durationMs: Number(ms) }, SCENARIOS[scenario].loop(lib))
  const byKind = new Map()
  for (const m of mappings()) {
    const k = kind(m)
    byKind.set(k, (byKind.get(k) ?? 0) + m.rss)
  }
  const heap = v8.getHeapStatistics()
  const spaces = Object.fromEntries(v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.physical_space_size]))
  const usage = process.memoryUsage()
  const rssNow = usage.rss / MiB
  console.log(`${id} ${scenario} c=${conc}: ${Math.round(summary.perSecond)} cycles/s; RSS now ${rssNow.toFixed(1)} MiB, peak ${(process.resourceUsage().maxRSS / 1024).toFixed(1)} MiB; threads ${fs.readdirSync('/proc/self/task').length}`)
  for (const [k, kb] of [...byKind].sort((a, b) => b[1] - a[1])) console.log(`  ${(kb / 1024).toFixed(1).padStart(6)} MiB  ${k}`)
  console.log(`  of the anonymous memory: V8 heap ${(heap.total_physical_size / MiB).toFixed(1)} MiB resident (new space ${((spaces.new_space ?? 0) / MiB).toFixed(1)}, old ${((spaces.old_space ?? 0) / MiB).toFixed(1)}, code ${((spaces.code_space ?? 0) / MiB).toFixed(1)}), V8 malloced ${(heap.malloced_memory / MiB).toFixed(1)} MiB, ArrayBuffers ${(usage.arrayBuffers / MiB).toFixed(1)} MiB`)
  await lib.close()
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err)
    process.exit(1)
  },
)
