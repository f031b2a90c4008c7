'use strict'
// The measuring loop of a worker: async loops in this process, a warmup, then a timed window in which every
// completed cycle is recorded (in a fixed-size histogram, so a long soak does not grow memory), with this
// process's CPU time and the redis-server's (a cluster's: summed over its nodes) over the same window.

const { createHistogram, performance } = require('node:perf_hooks')
const { cpuSeconds } = require('./proc')

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * Run `concurrency` copies of `loop(index, run)` until `run.stopped`; a loop calls `run.record(ms, ok)` per cycle,
 * which counts only inside the measured window (after `warmupMs`, for `durationMs`); `redisPid` is the pid of the
 * redis-server, or an array of them (a cluster). Resolves the summary.
 */
async function measure({ concurrency, warmupMs, durationMs, redisPid }, loop) {
  const histogram = createHistogram()
  const run = {
    stopped: false,
    measuring: false,
    ok: 0,
    record(ms, ok = true) {
      if (!this.measuring) return
      histogram.record(Math.max(1, Math.round(ms * 1e6)))
      if (ok) this.ok++
    },
  }
  let failure = null
  const loops = Array.from({ length: concurrency }, (_, index) =>
    loop(index, run).catch((err) => {
      failure ??= err
      run.stopped = true
    }),
  )
  await sleep(warmupMs)
  const start = snapshot(redisPid)
  run.measuring = true
  await sleep(durationMs)
  run.measuring = false
  run.stopped = true
  const end = snapshot(redisPid)
  await Promise.all(loops)
  if (failure) throw failure

  const seconds = (end.at - start.at) / 1000
  const nodeCpu = (end.cpu.user + end.cpu.system - start.cpu.user - start.cpu.system) / 1e6
  const cycles = histogram.count
  return {
    seconds,
    cycles,
    ok: run.ok,
    perSecond: cycles / seconds,
    p50: cycles ? histogram.percentile(50) / 1e6 : NaN,
    p99: cycles ? histogram.percentile(99) / 1e6 : NaN,
    p999: cycles ? histogram.percentile(99.9) / 1e6 : NaN,
    nodeCpu: nodeCpu / seconds,
    redisCpu: (end.redis - start.redis) / seconds,
  }
}

/** The clock, this process's CPU usage and the redis-server's CPU seconds (`redisPid`: one pid or several), now. */
function snapshot(redisPid) {
  return { at: performance.now(), cpu: process.cpuUsage(), redis: cpuSeconds(redisPid) }
}

module.exports = { measure, sleep }
