'use strict'
// Fenced writes (`npm run bench:fenced [-- --seconds N] [--reps N] [--out FILE]`): the overselling example's
// transaction (read a stock row, write it back minus one, log the decrement) inside redis-snatch/fence's `fenced`,
// against the same transaction without it, through a node-postgres and a mysql2 pool, on a throwaway Postgres and
// MariaDB (__test__/support/databases.js) started twice: with their defaults (each commit flushed to disk) and without
// the flush (where the cost of a statement shows); and, for a yardstick, the same transaction with one statement more
// (`SELECT 1`). One at a time (latency p50 and p99) and 16 at a time on 16 rows (transactions/s); each fenced call has
// a higher fence than the last, as a new holder's. The ways alternate, `--reps` times each, `--seconds` per measure;
// the medians are reported. Prints a Markdown table.

const { createHistogram } = require('node:perf_hooks')
const { fenced } = require('../lib/fence')
const { startMariadb, startPostgres } = require('../__test__/support/databases')
const { createStock, fillStock, openPool, readStock, transaction, writeStock } = require('../__test__/support/stock')
const { option, publish } = require('./lib/cli')

const seconds = Number(option('--seconds', 3))
const reps = Number(option('--reps', 3))
const TABLE = 'bench_stock'
const WIDE = 16

/** The median of `values`. */
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]

/** The ways measured: the transaction alone, with one statement more, and in fenced. */
const WAYS = ['plain', 'one more statement', 'fenced']

/**
 * `concurrency` loops, each on its own row, running the transaction `way` (of WAYS) for `seconds`: transactions/s and
 * the latencies (ns) in `histogram`.
 */
async function measure(dialect, pool, way, concurrency, histogram, fences) {
  const skus = Array.from({ length: concurrency }, (_, i) => `sku-${i}`)
  const decrement = (sku, fence) => async (tx) => {
    const qty = await readStock(dialect, tx, TABLE, sku)
    await writeStock(dialect, tx, TABLE, sku, qty - 1, fence, 'bench')
  }
  const until = performance.now() + seconds * 1000
  let done = 0
  await Promise.all(
    skus.map(async (sku) => {
      while (performance.now() < until) {
        const fence = fences.next++
        const started = process.hrtime.bigint()
        if (way === 'fenced') await fenced(pool, sku, fence, decrement(sku, fence))
        else if (way === 'plain') await transaction(dialect, pool, decrement(sku, fence))
        else await transaction(dialect, pool, async (tx) => (await tx.query('SELECT 1'), decrement(sku, fence)(tx)))
        histogram.record(Number(process.hrtime.bigint() - started))
        done++
      }
    }),
  )
  return done / seconds
}

/** The figures of one database (`start`ed with `durable`): for each concurrency and way, rate and latencies. */
async function database(dialect, start, durable) {
  const server = await start({ durable })
  const pool = openPool(dialect, server.config, WIDE)
  const fences = { next: 1n }
  try {
    await createStock(dialect, pool, TABLE)
    const rows = []
    for (const concurrency of [1, WIDE]) {
      await fillStock(dialect, pool, TABLE, Array.from({ length: concurrency }, (_, i) => `sku-${i}`), 1_000_000_000)
      const rates = Object.fromEntries(WAYS.map((way) => [way, []]))
      const histograms = Object.fromEntries(WAYS.map((way) => [way, createHistogram()]))
      for (const way of WAYS) await measure(dialect, pool, way, concurrency, createHistogram(), fences) // warm-up
      for (let rep = 0; rep < reps; rep++) {
        for (const way of rep % 2 ? [...WAYS].reverse() : WAYS) rates[way].push(await measure(dialect, pool, way, concurrency, histograms[way], fences))
      }
      for (const way of WAYS) {
        const h = histograms[way]
        rows.push({ concurrency, way, rate: median(rates[way]), p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6 })
      }
    }
    return rows
  } finally {
    await pool.end()
    await server.stop()
  }
}

async function main() {
  const lines = [
    `The stock example's transaction (SELECT, UPDATE, INSERT; BEGIN and COMMIT) alone, with one statement more, and in fenced, ${reps} × ${seconds} s ` +
      `per case alternating, medians; Node ${process.version}, node-postgres ${require('pg/package.json').version}, ` +
      `mysql2 ${require('mysql2/package.json').version}.`,
    '',
    '| database | commits | concurrency | way | transactions/s | p50 ms | p99 ms | / plain |',
    '|---|---|---:|---|---:|---:|---:|---:|',
  ]
  const cases = [
    ['postgres', 'Postgres 15', startPostgres],
    ['mysql', 'MariaDB 10.11', startMariadb],
  ]
  for (const [dialect, name, start] of cases) {
    for (const durable of [true, false]) {
      const rows = await database(dialect, start, durable)
      for (const row of rows) {
        const plain = rows.find((r) => r.concurrency === row.concurrency && r.way === 'plain')
        const ratio = row.way === 'plain' ? '' : `${((row.rate / plain.rate) * 100).toFixed(0)}%`
        lines.push(
          `| ${name} | ${durable ? 'flushed (default)' : 'not flushed'} | ${row.concurrency} | ${row.way} | ${row.rate.toFixed(0)} | ` +
            `${row.p50.toFixed(2)} | ${row.p99.toFixed(2)} | ${ratio} |`,
        )
      }
    }
  }
  publish(lines.join('\n'))
}

main().catch((err) => {
  console.error(err)
  process.exitCode = 1
})
