'use strict'
// The chaos suite's scenarios of redis-snatch/fence: what reaches a database. Workers decrement stock rows in a real
// Postgres or MariaDB as overselling code does (withLock, then read the stock and write back what was read minus one,
// in a transaction) while holders are SIGSTOPped past their lease and resumed; then the database is audited: no lost
// update (final stock = initial − the decrements committed) and, per resource, the committed decrements' fences never
// fall. Each scenario runs twice: with `fenced`, and without it (the control), which must lose updates, so that the
// audit is shown able to fail.

const os = require('node:os')
const { startMariadb, startPostgres } = require('../__test__/support/databases')
const { createStock, decrements, fillStock, openPool, readStock } = require('../__test__/support/stock')

const TABLE = 'chaos_stock'
const INITIAL = 1_000_000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** The scenario on `dialect`'s database ('postgres', or 'mysql': MariaDB), named `database` in its title. */
function stockScenario(dialect, database) {
  return {
    title:
      `stock in ${database}: 4 workers (withLock, ttl 1 s) on 2 rows, each under the lock working up to 10 ms, then ` +
      'reading the stock and writing back what it read minus one up to 10 ms later, in fenced (without the signal: ' +
      'only the database checks the fence); a holder SIGSTOPped for ttl + 0.7 s every 1.5 s. Then the same without ' +
      'fenced (a plain transaction), the control',
    data: true,
    async run(context) {
      const server = await (dialect === 'postgres' ? startPostgres() : startMariadb())
      try {
        const runs = [await phase(context, dialect, server, true), await phase(context, dialect, server, false)]
        const [withFence, control] = runs
        const failures = []
        if (withFence.lost > 0) failures.push(`${withFence.lost} updates lost with fenced`)
        if (withFence.outOfOrder > 0) failures.push(`${withFence.outOfOrder} decrements committed with a fence below the one before`)
        if (control.lost === 0) failures.push('the control lost no update: the audit was not shown able to fail')
        return { runs, dataFailures: failures }
      } finally {
        await server.stop()
      }
    },
  }
}

/** One run on 2 fresh rows, `fenced` or the control; its audit, and how the workers' decrements ended. */
async function phase({ url, workers, seconds }, dialect, server, fenced) {
  const keys = [0, 1].map((i) => `${fenced ? 'fenced' : 'control'}:${i}`)
  const pool = openPool(dialect, server.config, 2)
  try {
    await createStock(dialect, pool, TABLE)
    await fillStock(dialect, pool, TABLE, keys, INITIAL)
    const [outcomes, errors] = [{ ...workers.outcomes }, { ...workers.errors }]
    const stock = { dialect, table: TABLE, db: server.config }
    for (let i = 0; i < 4; i++) {
      workers.spawn({ mode: 'stock', keys, locker: { url, prefix: 'chaos:' }, ttl: 1000, wait: 5000, pauseMs: 10, fenced, stock })
    }
    await sleep(1500)
    let stops = 0
    const end = Date.now() + seconds(20) * 1000
    while (Date.now() < end) {
      const holder = workers.holder()
      if (holder) {
        await workers.pause(holder, 1700, false)
        stops++
      }
      await sleep(800)
    }
    await workers.stop()
    const since = (now, before) =>
      Object.fromEntries(Object.entries(now).map(([k, v]) => [k, v - (before[k] ?? 0)]).filter(([, v]) => v > 0))
    return { fenced, stops, ...(await audit(dialect, pool, keys)), outcomes: since(workers.outcomes, outcomes), errors: since(workers.errors, errors) }
  } finally {
    await pool.end()
  }
}

/**
 * The audit of rows `keys`: the decrements committed, those lost (committed, but not in the stock: two writers wrote
 * the same value), and those whose fence is below the one committed before it on the row (in the order of the stock
 * they wrote, which falls by one with each decrement that is not lost).
 */
async function audit(dialect, pool, keys) {
  let [committed, lost, outOfOrder] = [0, 0, 0]
  for (const key of keys) {
    const left = await readStock(dialect, pool, TABLE, key)
    const written = (await decrements(dialect, pool, TABLE, key)).reverse()
    committed += written.length
    lost += written.length - (INITIAL - left)
    for (let i = 1; i < written.length; i++) if (written[i].fence < written[i - 1].fence) outOfOrder++
  }
  return { committed, lost, outOfOrder }
}

/** The report of the stock scenarios' `results` (runScenario's). */
function renderStock(results, scale) {
  const runs = results.flatMap((r) => r.runs.map((run) => ({ ...run, name: r.name })))
  const fencedRuns = runs.filter((run) => run.fenced)
  const sum = (list, f) => list.reduce((n, run) => n + f(run), 0)
  const lines = [
    `Run of ${new Date().toISOString().slice(0, 19)}Z on ${os.availableParallelism()} CPUs (${os.cpus()[0]?.model.trim()}), ` +
      `Node ${process.version}${scale !== 1 ? `, durations × ${scale}` : ''}: with fenced, ` +
      `${sum(fencedRuns, (r) => r.committed).toLocaleString('en')} decrements committed, ${sum(fencedRuns, (r) => r.lost)} lost, ` +
      `${sum(fencedRuns, (r) => r.outOfOrder)} fences out of order, ${sum(fencedRuns, (r) => r.outcomes.stale ?? 0)} stale writes ` +
      `refused; without it, ${sum(runs.filter((r) => !r.fenced), (r) => r.lost)} updates lost.`,
    '',
    '| scenario | run | decrements committed | lost updates | fences out of order | stale writes refused | committed after the lease was lost | holders stopped | calls failed, by code |',
    '|---|---|---:|---:|---:|---:|---:|---:|---|',
  ]
  for (const run of runs) {
    const errors = Object.entries(run.errors).map(([code, n]) => `${code} ${n}`).join(', ') || '—'
    lines.push(
      `| ${run.name} | ${run.fenced ? 'fenced' : 'control: a plain transaction'} | ${run.committed.toLocaleString('en')} | ${run.lost} | ` +
        `${run.outOfOrder} | ${run.fenced ? run.outcomes.stale ?? 0 : '—'} | ${run.outcomes.late ?? 0} | ${run.stops} | ${errors} |`,
    )
  }
  lines.push('')
  for (const r of results) {
    lines.push(`- **${r.name}**: ${r.title}.${r.dataFailures.length ? ` AUDIT FAILED: ${r.dataFailures.join('; ')}.` : ''}`)
  }
  return lines.join('\n')
}

module.exports = { stockScenario, renderStock }
