'use strict'
// The overselling example of redis-snatch/fence on either database, for its tests, the chaos suite and the benchmark:
// a stock table (sku, qty) and a log of the decrements committed (sku, the qty written, the writer's fence and name),
// with the SQL written once for node-postgres ('postgres') and mysql2/promise ('mysql', MariaDB here).

const pg = require('pg')
const mysql = require('mysql2/promise')

/** `text` with `?` placeholders, as `dialect` writes them ($1, $2, … for Postgres). */
function placeholders(dialect, text) {
  let n = 0
  return dialect === 'postgres' ? text.replace(/\?/g, () => `$${++n}`) : text
}

/** Runs `text` (`?` placeholders) on `conn`, a pool, client or connection of `dialect`'s driver; the rows. */
async function query(dialect, conn, text, params = []) {
  const result = await conn.query(placeholders(dialect, text), params)
  return dialect === 'postgres' ? result.rows : result[0]
}

/** A pool on a server `config` (startPostgres's or startMariadb's). */
function openPool(dialect, config, max = 10) {
  if (dialect === 'mysql') return mysql.createPool({ ...config, connectionLimit: max })
  const pool = new pg.Pool({ ...config, max })
  pool.on('error', () => {}) // an idle client whose server went away
  return pool
}

/** One connection (a node-postgres Client, a mysql2/promise Connection) on a server `config`. */
async function openConnection(dialect, config) {
  if (dialect === 'mysql') return mysql.createConnection(config)
  const client = new pg.Client(config)
  client.on('error', () => {})
  await client.connect()
  return client
}

/** Creates `table` (sku → qty) and `table`_decrements, if missing. */
async function createStock(dialect, conn, table) {
  await query(dialect, conn, `CREATE TABLE IF NOT EXISTS ${table} (sku VARCHAR(64) PRIMARY KEY, qty INT NOT NULL)`)
  await query(
    dialect,
    conn,
    `CREATE TABLE IF NOT EXISTS ${table}_decrements (sku VARCHAR(64) NOT NULL, qty INT NOT NULL, fence BIGINT NOT NULL, writer VARCHAR(64) NOT NULL)`,
  )
}

/** Puts `qty` of each of `skus` in stock, and no decrement. */
async function fillStock(dialect, conn, table, skus, qty) {
  for (const sku of skus) {
    await query(dialect, conn, `DELETE FROM ${table} WHERE sku = ?`, [sku])
    await query(dialect, conn, `DELETE FROM ${table}_decrements WHERE sku = ?`, [sku])
    await query(dialect, conn, `INSERT INTO ${table} (sku, qty) VALUES (?, ?)`, [sku, qty])
  }
}

/** The stock of `sku`, read on `conn` (a plain read: no lock taken, as overselling code reads). */
async function readStock(dialect, conn, table, sku) {
  const [row] = await query(dialect, conn, `SELECT qty FROM ${table} WHERE sku = ?`, [sku])
  return Number(row.qty)
}

/** Writes `qty` as `sku`'s stock on `conn` and logs the decrement with `fence` and `writer`. */
async function writeStock(dialect, conn, table, sku, qty, fence, writer) {
  await query(dialect, conn, `UPDATE ${table} SET qty = ? WHERE sku = ?`, [qty, sku])
  await query(dialect, conn, `INSERT INTO ${table}_decrements (sku, qty, fence, writer) VALUES (?, ?, ?, ?)`, [sku, qty, String(fence), writer])
}

/**
 * `fn(tx)` in a plain transaction of pool `db` (one of its connections: BEGIN, fn, COMMIT; ROLLBACK if fn throws):
 * what `fenced` does, without the fence.
 */
async function transaction(dialect, db, fn) {
  const tx = dialect === 'postgres' ? await db.connect() : await db.getConnection()
  try {
    await tx.query(dialect === 'postgres' ? 'BEGIN' : 'START TRANSACTION')
    let result
    try {
      result = await fn(tx)
    } catch (err) {
      await tx.query('ROLLBACK')
      throw err
    }
    await tx.query('COMMIT')
    return result
  } finally {
    tx.release()
  }
}

/** A BIGINT column as text, exactly (no driver's Number on the way). */
const asText = (dialect, column) => (dialect === 'postgres' ? `${column}::text` : `CAST(${column} AS CHAR)`)

/** The decrements of `sku` committed: `{ qty, fence: bigint, writer }`, the last one first (the stock written falls). */
async function decrements(dialect, conn, table, sku) {
  const rows = await query(dialect, conn, `SELECT qty, ${asText(dialect, 'fence')} AS fence, writer FROM ${table}_decrements WHERE sku = ? ORDER BY qty`, [sku])
  return rows.map((r) => ({ qty: Number(r.qty), fence: BigInt(r.fence), writer: r.writer }))
}

/** The fence recorded for `resource` in fence table `table`, exactly; null when none is. */
async function recordedFence(dialect, conn, table, resource) {
  const [row] = await query(dialect, conn, `SELECT ${asText(dialect, 'fence')} AS fence FROM ${table} WHERE resource = ?`, [resource])
  return row ? BigInt(row.fence) : null
}

module.exports = {
  query,
  openPool,
  openConnection,
  createStock,
  fillStock,
  readStock,
  writeStock,
  transaction,
  decrements,
  recordedFence,
}
