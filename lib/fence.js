'use strict'
// redis-snatch/fence: a lock's fence checked where the data is. `fenced(db, resource, fence, fn)` runs fn in one
// transaction of the user's own database that first records the fence for `resource` in a small fence table; a fence
// below the one recorded there rolls everything back (StaleFenceError). The drivers (node-postgres, mysql2/promise) are
// the user's: `db` is told apart by its methods, and no driver is required here.

const { LockTimeoutError, SnatchError, StaleFenceError, invalidArg } = require('./errors')
const { checkFn, checkType, describe, positiveOption, snapshot } = require('./options')

const DEFAULT_TABLE = 'snatch_fences'
/** How long a fenced write waits for its fence row by default, in ms. */
const DEFAULT_WAIT_MS = 5000
/** The longest resource, in bytes of UTF-8 (the fence table's key). */
const MAX_RESOURCE_BYTES = 512
/** The largest fence a BIGINT column holds. */
const MAX_FENCE = 2n ** 63n - 1n
/** A table name: an identifier, or schema.identifier; quoted in the SQL, so it is checked strictly. */
const TABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$/

/**
 * Postgres, through node-postgres. The transaction: `BEGIN; SHOW lock_timeout; SET LOCAL lock_timeout = <wait>` (one
 * round trip, as a plain BEGIN), then the fence row's upsert, which waits at most `wait` for its row lock, returns the
 * fence recorded and puts lock_timeout back as it was, for fn's own statements (the one statement fenced adds).
 */
const postgres = {
  quote: (table) => table.split('.').map((part) => `"${part}"`).join('.'),

  /** A connection of the pool's, or the Client itself, refused when it is inside a transaction already. */
  async acquire(db, pool) {
    if (pool) return db.connect()
    if (typeof db.getTransactionStatus !== 'function') {
      throw invalidArg(TypeError, 'db is a node-postgres Client without getTransactionStatus() (pg < 8.21): upgrade pg, or pass a Pool')
    }
    const status = db.getTransactionStatus()
    if (status !== 'I') {
      const why = status === null ? 'cannot tell whether it is inside a transaction (not connected yet?)' : 'is inside a transaction already'
      throw invalidArg(TypeError, `db is a node-postgres Client that ${why}: fenced runs a transaction of its own; call it outside yours, or pass a Pool`)
    }
    return db
  },

  release(conn, pool, broken) {
    if (pool) conn.release(broken)
  },

  /** Begins the transaction; the session's lock_timeout, to put back once the fence row is ours. */
  async begin(conn, wait) {
    const results = await conn.query(`BEGIN; SHOW lock_timeout; SET LOCAL lock_timeout = ${wait}`)
    return results[1].rows[0].lock_timeout
  },

  /** Records `fence` unless a higher one is; the fence recorded now (`fence`, or the higher one). */
  async record(conn, table, resource, fence, lockTimeout) {
    const { rows } = await conn.query(
      `INSERT INTO ${this.quote(table)} AS f (resource, fence) VALUES ($1, $2::bigint)
       ON CONFLICT (resource) DO UPDATE SET fence = GREATEST(f.fence, EXCLUDED.fence)
       RETURNING f.fence::text AS fence, set_config('lock_timeout', $3, true) AS lock_timeout`,
      [resource, String(fence), lockTimeout],
    )
    return BigInt(rows[0].fence)
  },

  /** Commits; a transaction that a failed statement of fn ended (Postgres then answers COMMIT with ROLLBACK) is an error. */
  async commit(conn) {
    const { command } = await conn.query('COMMIT')
    if (command !== 'COMMIT') {
      const message =
        'the transaction was rolled back, not committed: a statement of fn failed and fn went on (Postgres ends a ' +
        'transaction at its first failed statement; use a SAVEPOINT for a statement that may fail)'
      throw new SnatchError(message, 'ERR_SNATCH_ROLLED_BACK')
    }
  },

  rollback: (conn) => conn.query('ROLLBACK'),
  waited: (wait) => `${wait} ms`,

  /** Creates the table, one process at a time (concurrent CREATE TABLE IF NOT EXISTS can fail in Postgres). */
  async create(conn, table) {
    try {
      await conn.query(`BEGIN; SELECT pg_advisory_xact_lock(hashtext('${table}')); ${fenceTableSql('postgres', table)}; COMMIT`)
    } catch (err) {
      await conn.query('ROLLBACK')
      // Created meanwhile by someone who did not take the advisory lock.
      if (err?.code !== '42P07' && err?.code !== '23505') throw err
    }
  },

  missingTable: (err) => err?.code === '42P01',
  lockTimeout: (err) => err?.code === '55P03',
}

/** mysql2's flag of an open transaction in a statement's answer (SERVER_STATUS_IN_TRANS). */
const IN_TRANSACTION = 1

/**
 * MySQL and MariaDB, through mysql2/promise. Before the transaction, one SET keeps the session's
 * innodb_lock_wait_timeout and sets `wait` (rounded up to whole seconds), its answer telling whether a transaction is
 * open; then START TRANSACTION, the fence row's upsert (which says whether the fence was stale: LAST_INSERT_ID(expr)
 * is the answer's insert id only then), and a SET that puts the timeout back for fn's own statements.
 */
const mysql = {
  quote: (table) => table.split('.').map((part) => `\`${part}\``).join('.'),

  acquire: (db, pool) => (pool ? db.getConnection() : db),

  release(conn, pool, broken) {
    if (pool && broken) conn.destroy()
    else if (pool) conn.release()
  },

  async begin(conn, wait) {
    const seconds = Math.ceil(wait / 1000)
    const [answer] = await conn.query('SET @snatch_lock_wait = @@SESSION.innodb_lock_wait_timeout, SESSION innodb_lock_wait_timeout = ?', [seconds])
    if (answer.serverStatus & IN_TRANSACTION) {
      await this.restore(conn)
      throw invalidArg(TypeError, 'db is a mysql2 Connection inside a transaction already: fenced runs a transaction of its own (START TRANSACTION would commit yours); call it outside yours, or pass a Pool')
    }
    try {
      await conn.query('START TRANSACTION')
    } catch (err) {
      await this.restore(conn).catch(() => {})
      throw err
    }
  },

  restore: (conn) => conn.query('SET SESSION innodb_lock_wait_timeout = @snatch_lock_wait'),

  async record(conn, table, resource, fence) {
    const value = String(fence)
    let current = fence
    try {
      const [answer] = await conn.query(
        `INSERT INTO ${this.quote(table)} (resource, fence) VALUES (?, CAST(? AS SIGNED))
         ON DUPLICATE KEY UPDATE fence = IF(fence <= CAST(? AS SIGNED), CAST(? AS SIGNED), LAST_INSERT_ID(fence))`,
        [resource, value, value, value],
      )
      // 0 unless the recorded fence was higher; its value then (which mysql2 may give as a Number), read exactly.
      if (String(answer.insertId) !== '0') {
        const [rows] = await conn.query(`SELECT CAST(fence AS CHAR) AS fence FROM ${this.quote(table)} WHERE resource = ?`, [resource])
        current = BigInt(rows[0].fence)
      }
    } catch (err) {
      // When the connection is gone, so is the setting; the rollback tells.
      await this.restore(conn).catch(() => {})
      throw err
    }
    await this.restore(conn)
    return current
  },

  /** Waiting for the fence row counts whole seconds. */
  waited: (wait) => `${Math.ceil(wait / 1000)} s`,

  commit: (conn) => conn.query('COMMIT'),
  rollback: (conn) => conn.query('ROLLBACK'),

  /** MySQL and MariaDB create a table once however many sessions ask at once. */
  create: (conn, table) => conn.query(fenceTableSql('mysql', table)),

  missingTable: (err) => err?.errno === 1146, // ER_NO_SUCH_TABLE
  lockTimeout: (err) => err?.errno === 1205, // ER_LOCK_WAIT_TIMEOUT
}

/** The dialect of `db` and whether it is a pool, from its methods; an error naming what is taken otherwise. */
function driverOf(db) {
  const has = (name) => typeof db?.[name] === 'function'
  const callbacks = (what) =>
    invalidArg(TypeError, `db is a mysql2 ${what} of the callback API: pass its promise() (or create it from 'mysql2/promise')`)
  // mysql2/promise: a Pool hands out connections, a Connection (also a pool's) runs transactions itself.
  if (has('getConnection') && has('query')) {
    if (has('promise')) throw callbacks('Pool')
    return { driver: mysql, pool: true }
  }
  if (has('beginTransaction') && has('query')) {
    if (has('promise')) throw callbacks('Connection')
    return { driver: mysql, pool: false }
  }
  // node-postgres: a Pool counts its clients; a Client (also a pool's) escapes identifiers.
  if (has('connect') && has('query') && typeof db.totalCount === 'number') return { driver: postgres, pool: true }
  if (has('connect') && has('query') && has('escapeIdentifier')) return { driver: postgres, pool: false }
  throw invalidArg(TypeError, `db must be a node-postgres Pool or Client, or a mysql2/promise Pool or Connection, got ${describe(db)}`)
}

/** Checks `resource`: the fence table's key. */
function checkResource(resource) {
  if (typeof resource !== 'string') throw invalidArg(TypeError, `resource must be a string, got ${describe(resource)}`)
  if (resource === '' || resource.includes('\0') || !resource.isWellFormed()) {
    throw invalidArg(TypeError, 'resource must be a non-empty, well-formed string without NUL characters')
  }
  const bytes = Buffer.byteLength(resource)
  if (bytes > MAX_RESOURCE_BYTES) {
    throw invalidArg(RangeError, `resource is ${bytes} bytes long; the limit is ${MAX_RESOURCE_BYTES} (UTF-8)`)
  }
}

/** `fence` as a bigint: a bigint, or its decimal string (a LockHandle's), within a BIGINT column's range. */
function fenceOf(fence) {
  const value = typeof fence === 'string' && /^\d{1,19}$/.test(fence) ? BigInt(fence) : fence
  if (typeof value !== 'bigint') {
    const hint = typeof fence === 'number' ? ' (a Number may have lost digits of it: pass ctx.fence, a bigint, as it is)' : ''
    throw invalidArg(TypeError, `fence must be a bigint (a lock's fence) or its decimal string, got ${describe(fence)}${hint}`)
  }
  if (value < 0n || value > MAX_FENCE) throw invalidArg(RangeError, `fence must be within 0 … 2^63 − 1 (a BIGINT), got ${value}`)
  return value
}

/** Checks a table name. */
function checkTable(table) {
  checkType('table', table, 'string')
  if (!TABLE_NAME.test(table)) {
    throw invalidArg(TypeError, `table must be a name of letters, digits and _ (or schema.name), got '${table}'`)
  }
}

/** fenced()'s options, checked. */
function settingsOf(options) {
  const o = snapshot('options', options, ['table', 'signal', 'wait'])
  if (o.table !== undefined) checkTable(o.table)
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalidArg(TypeError, 'signal must be an AbortSignal')
  return { table: o.table ?? DEFAULT_TABLE, signal: o.signal, wait: positiveOption('wait', o.wait, DEFAULT_WAIT_MS) }
}

/**
 * Runs `fn(tx)` in one transaction of `db` that first records `fence` for `resource` in the fence table (created when
 * missing): StaleFenceError, with nothing committed and fn not called, when a higher fence is recorded there. See
 * lib/fence.d.ts.
 */
async function fenced(db, resource, fence, fn, options) {
  const { driver, pool } = driverOf(db)
  checkResource(resource)
  const value = fenceOf(fence)
  checkFn(fn)
  const o = settingsOf(options)
  o.signal?.throwIfAborted()
  const run = async () => {
    o.signal?.throwIfAborted()
    const conn = await driver.acquire(db, pool)
    const state = { broken: false }
    try {
      return await transaction(driver, conn, state, resource, value, fn, o)
    } finally {
      driver.release(conn, pool, state.broken)
    }
  }
  if (pool) return run()
  // A Client or Connection holds one transaction at a time: a fenced call on it waits for the one before to end.
  const turn = (turns.get(db) ?? Promise.resolve()).then(run)
  turns.set(db, turn.catch(() => {}))
  return turn
}

/** The last fenced call on each Client or Connection given as `db` (settled or not), for the next to wait for. */
const turns = new WeakMap()

/** The transaction on `conn`; `state.broken` once a rollback failed (a pool's connection is then destroyed). */
async function transaction(driver, conn, state, resource, fence, fn, { table, signal, wait }) {
  const rollback = async () => {
    try {
      await driver.rollback(conn)
    } catch {
      state.broken = true
    }
  }
  /** Rolls back, then rejects with `err`. */
  const fail = async (err) => {
    await rollback()
    throw err
  }
  for (let created = false; ; created = true) {
    let current
    try {
      const begun = await driver.begin(conn, wait)
      current = await driver.record(conn, table, resource, fence, begun)
    } catch (err) {
      // Refused before it began (a Connection inside a transaction of the caller's): that one is not ours to end.
      if (err?.code === 'ERR_SNATCH_INVALID_ARG') throw err
      await rollback()
      if (driver.missingTable(err) && !created && !state.broken) {
        await driver.create(conn, table)
        continue
      }
      if (driver.lockTimeout(err)) {
        const message =
          `the fence row of '${resource}' (table ${table}) was not free within ${driver.waited(wait)}: another ` +
          'transaction holds it (a holder paused inside fenced?); nothing was committed'
        throw new LockTimeoutError(message, { cause: err })
      }
      throw err
    }
    if (current > fence) return fail(new StaleFenceError(resource, fence, current))
    break
  }
  let result
  try {
    signal?.throwIfAborted()
    result = await fn(conn)
    signal?.throwIfAborted()
  } catch (err) {
    return fail(err)
  }
  try {
    await driver.commit(conn)
  } catch (err) {
    // Ended by the server (a serialization failure, say) or a lost connection: the rollback says which.
    return fail(err)
  }
  return result
}

/**
 * The CREATE TABLE of the fence table for `dialect` ('postgres', or 'mysql' for MySQL and MariaDB), as fenced creates
 * it when missing: one row per resource, its highest fence recorded.
 */
function fenceTableSql(dialect, table = DEFAULT_TABLE) {
  checkTable(table)
  if (dialect === 'postgres') {
    return `CREATE TABLE IF NOT EXISTS ${postgres.quote(table)} (resource text PRIMARY KEY, fence bigint NOT NULL)`
  }
  if (dialect === 'mysql') {
    // Bytes, compared as bytes: no collation folds case or trailing spaces of two resources into one.
    return `CREATE TABLE IF NOT EXISTS ${mysql.quote(table)} (resource VARBINARY(${MAX_RESOURCE_BYTES}) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB`
  }
  throw invalidArg(TypeError, `dialect must be 'postgres' or 'mysql' (MySQL and MariaDB), got ${describe(dialect)}`)
}

module.exports = { fenced, fenceTableSql, StaleFenceError }
