'use strict'
// What a hot key's wake-ups cost the nodes of a Redis Cluster that do not own the key (`npm run bench:cluster-wakeups
// [-- --packages [LABEL=]DIR,…] [--seconds N] [--rounds N] [--out FILE]`): 20 callers loop `withLock(key, fn, { wait })` on
// one key (fn resolves at once: every release wakes a waiter) on clusters of 3 and 6 masters (no replicas), and for
// each package (say, the build before and this one), in alternating rounds on the same cluster, the cluster-bus
// messages (CLUSTER INFO) and the CPU (INFO cpu) of the masters that do not own the key, per 1,000 handoffs. PUBLISH
// is relayed to every node over the bus; a sharded SPUBLISH stays on the key's shard. Prints a Markdown table.

const path = require('node:path')
const { redisCommand } = require('../__test__/support/redis-server')
const { startCluster } = require('../__test__/support/deployments')

const { option, publish } = require('./lib/cli')
/** `[label, dir]` of each package measured: this checkout by default. */
const packages = option('--packages', `this=${path.join(__dirname, '..')}`)
  .split(',')
  .map((p) => (p.includes('=') ? p.split('=') : [path.basename(p), p]))
  .map(([label, dir]) => [label, path.resolve(dir)])
const seconds = Number(option('--seconds', 3))
const rounds = Number(option('--rounds', 3))
const CALLERS = 20
const KEY = 'hot'

/** A node's counters: bus messages received (all, PUBLISH, sharded PUBLISH) and CPU seconds (user + sys). */
async function counters(node) {
  const [info, cpu] = await Promise.all([
    redisCommand(node.inspectUrl, 'CLUSTER', 'INFO'),
    redisCommand(node.inspectUrl, 'INFO', 'cpu'),
  ])
  const field = (text, name) => Number(new RegExp(`${name}:([\\d.]+)`).exec(text)?.[1] ?? 0)
  return {
    bus: field(info, 'cluster_stats_messages_received'),
    publish: field(info, 'cluster_stats_messages_publish_received'),
    publishShard: field(info, 'cluster_stats_messages_publishshard_received'),
    cpu: field(cpu, 'used_cpu_user') + field(cpu, 'used_cpu_sys'),
  }
}

/** The sum of `nodes`' counters. */
async function total(nodes) {
  const all = await Promise.all(nodes.map(counters))
  return all.reduce((a, c) => ({
    bus: a.bus + c.bus,
    publish: a.publish + c.publish,
    publishShard: a.publishShard + c.publishShard,
    cpu: a.cpu + c.cpu,
  }))
}

/** One round: package `pkg`'s callers on `cluster` for `seconds`; the handoffs and the others' counters' growth. */
async function round(cluster, others, [, dir]) {
  const { createLocker } = require(dir)
  const locker = createLocker({ cluster: cluster.seeds })
  let handoffs = 0
  let stopping = false
  const loop = async () => {
    while (!stopping) {
      await locker.withLock(KEY, async () => {}, { wait: 30_000 })
      handoffs++
    }
  }
  const loops = Array.from({ length: CALLERS }, loop)
  await new Promise((resolve) => setTimeout(resolve, 500)) // connections open, waiters queued
  const [before, counted] = [await total(others), handoffs]
  const started = process.hrtime.bigint()
  await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
  const [after, done] = [await total(others), handoffs]
  const elapsed = Number(process.hrtime.bigint() - started) / 1e9
  stopping = true
  await Promise.all(loops)
  await locker.close()
  const n = done - counted
  return {
    perSecond: n / elapsed,
    bus: ((after.bus - before.bus) / n) * 1000,
    publish: ((after.publish - before.publish) / n) * 1000,
    publishShard: ((after.publishShard - before.publishShard) / n) * 1000,
    cpuMs: ((after.cpu - before.cpu) * 1000 * 1000) / n,
  }
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

async function main() {
  const rows = []
  for (const masters of [3, 6]) {
    const cluster = await startCluster({ masters, replicas: 0 })
    try {
      const owner = await cluster.masterOf(`snatch:${KEY}`)
      const others = (await cluster.masters()).filter((m) => m.port !== owner.port)
      const results = new Map(packages.map((p) => [p, []]))
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? packages : [...packages].reverse()
        for (const pkg of order) results.get(pkg).push(await round(cluster, others, pkg))
      }
      for (const pkg of packages) {
        const runs = results.get(pkg)
        const m = (field) => median(runs.map((run) => run[field]))
        rows.push(
          `| ${masters} | ${pkg[0]} | ${Math.round(m('perSecond')).toLocaleString('en-US')} | ` +
            `${Math.round(m('bus')).toLocaleString('en-US')} | ${Math.round(m('publish')).toLocaleString('en-US')} | ` +
            `${Math.round(m('publishShard')).toLocaleString('en-US')} | ${m('cpuMs').toFixed(1)} |`,
        )
        console.error(rows.at(-1))
      }
    } finally {
      await cluster.stop()
    }
  }
  const report = [
    `A hot key's wake-ups on a cluster (no replicas): ${CALLERS} callers of withLock on one key, ${rounds} rounds of ` +
      `${seconds} s per package, alternating; medians. The other masters: those that do not own the key; their bus ` +
      'messages received (all, PUBLISH, sharded PUBLISH) and CPU (user + sys), per 1,000 handoffs.',
    '',
    '| masters | package | handoffs/s | bus messages, others | of which PUBLISH | sharded PUBLISH | CPU ms, others |',
    '|---:|---|---:|---:|---:|---:|---:|',
    ...rows,
  ].join('\n')
  publish(report)
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})
