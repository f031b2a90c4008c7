'use strict'
// Where the tail of a cycle's latency falls in time: redis-snatch withfn (or uncontended, or newkeys) at concurrency C for D ms
// from the very first call (no warmup), on the server of REDIS_URL; prints p50/p99/p99.9/max over the whole run, node
// CPU per cycle and max RSS, and with WINDOWS=1 a line per 250 ms window (start ms, cycles, p50, p99, max ms).
// Run from the package root after `npm run build`:
//   REDIS_URL=redis://127.0.0.1:6379 WINDOWS=1 node bench/experiments/tail/windows.js withfn 50 4000
// PKG=<path of another checkout> measures that build instead. Run with `node --trace-gc` to see the scavenges.
// TLS_CA=<PEM file> trusts that CA for a rediss:// REDIS_URL.
const { createLocker } = require(process.env.PKG || '../../..')
const { createHistogram, performance } = require('node:perf_hooks')
const scenario = process.argv[2] || 'withfn'
const conc = Number(process.argv[3] || 50)
const dur = Number(process.argv[4] || 5000)
async function main() {
  const tls = process.env.TLS_CA ? { ca: require('node:fs').readFileSync(process.env.TLS_CA) } : undefined
  const locker = createLocker({ url: process.env.REDIS_URL, tls, prefix: `tail${process.pid}:` })
  const all = createHistogram()
  const windows = []
  let win = createHistogram()
  const t0 = performance.now()
  let winStart = t0
  let stop = false
  const rec = (d) => {
    const v = Math.max(1, Math.round(d * 1e6))
    all.record(v)
    win.record(v)
    const now = performance.now()
    if (now - winStart >= 250) {
      windows.push([Math.round(winStart - t0), win.count, +(win.percentile(50) / 1e6).toFixed(3), +(win.percentile(99) / 1e6).toFixed(3), +(win.max / 1e6).toFixed(2)])
      win = createHistogram()
      winStart = now
    }
  }
  const loop = async (i) => {
    for (let n = 0; !stop; n++) {
      // newkeys: withfn on a new key every cycle.
      const key = scenario === 'newkeys' ? `k${i}:${n}` : `k${i}`
      const t = performance.now()
      if (scenario === 'withfn' || scenario === 'newkeys') await locker.snatchTask(key, async () => {})
      else {
        const lock = await locker.tryLock(key)
        await lock.release()
      }
      rec(performance.now() - t)
    }
  }
  const cpu0 = process.cpuUsage()
  const loops = Array.from({ length: conc }, (_, i) => loop(i))
  await new Promise((r) => setTimeout(r, dur))
  const cpu = process.cpuUsage(cpu0)
  stop = true
  await Promise.all(loops)
  await locker.close()
  const q = (p) => (all.percentile(p) / 1e6).toFixed(3)
  console.log(JSON.stringify({ scenario, conc, perSecond: Math.round(all.count / (dur / 1000)), p50: q(50), p99: q(99), p999: q(99.9), max: (all.max / 1e6).toFixed(2), rss: Math.round(process.resourceUsage().maxRSS / 1024), cpuUs: +((cpu.user + cpu.system) / all.count).toFixed(2) }))
  if (process.env.WINDOWS) for (const w of windows) console.log(w.join('\t'))
}
main()
