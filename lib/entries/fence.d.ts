/**
 * `redis-snatch/fence`: a lock's fence checked by your database, in the transaction of the write it guards.
 *
 * @module fence
 */
export { StaleFenceError } from '../../index'

/** Options of {@link fenced}. */
export interface FencedOptions {
  /**
   * The fence table: a name, or `schema.name` (letters, digits, `_`). Default `'snatch_fences'`. Created when missing
   * (see {@link fenceTableSql}).
   */
  table?: string
  /**
   * The lock's signal (`ctx.signal`, `lock.signal`). Already aborted: nothing starts. Aborted while fn runs: the
   * transaction is rolled back once fn settles (a statement in flight is not cancelled) and fenced rejects with the
   * signal's reason, whatever fn returned.
   */
  signal?: AbortSignal
  /**
   * How long to wait for the fence row, in ms (default 5000): another transaction holds it while it runs `fenced` for
   * the same resource (a holder paused inside fenced holds it until it resumes). Then fenced rejects
   * `LockTimeoutError` (`ERR_SNATCH_TIMEOUT`, the database's error as `cause`) and nothing is committed. The
   * database's own lock timeout, for that one statement: Postgres' `lock_timeout`; MySQL's and MariaDB's
   * `innodb_lock_wait_timeout`, in whole seconds (rounded up). fn's statements keep the session's own.
   */
  wait?: number
}

/**
 * Runs `fn(tx)` in one transaction of your database that first records `fence` for `resource` in the fence table
 * (one row per resource, its highest fence): when a higher fence is recorded there already, fn is not called, nothing
 * is committed and it rejects {@link StaleFenceError} (`ERR_SNATCH_STALE_FENCE`). An equal fence passes (one holder
 * writes many times). Resolves fn's value once the transaction committed.
 *
 * - `db`: a node-postgres `Pool` or `Client` (pg >= 8.21 for a Client), or a mysql2/promise `Pool` or `Connection`
 *   (MySQL, MariaDB). `tx`, fn's argument, is the transaction's connection, of the same driver: a pool's client or
 *   connection, or `db` itself (fenced calls on one Client or Connection run one after the other). A Client or
 *   Connection inside a transaction already is refused (`ERR_SNATCH_INVALID_ARG`); fenced runs its own.
 * - The fence row stays locked until the transaction ends: a stale holder that recorded its fence first is waited for
 *   (`options.wait`), never interleaved with the newer one, whose reads then see its writes.
 * - `resource`: what the fence guards, usually the lock's key: a non-empty string of at most 512 bytes of UTF-8.
 * - `fence`: the lock's fence, a bigint (`ctx.fence`), or its decimal string (a `LockHandle`'s).
 * - The table is created when missing (in a transaction of its own, before yours), also when several processes do it
 *   at once; see {@link fenceTableSql} to create it yourself.
 * - Postgres ends a transaction at its first failed statement: if fn catches such an error and goes on, the COMMIT
 *   rolls back, and fenced rejects `SnatchError` `ERR_SNATCH_ROLLED_BACK`. MySQL and MariaDB end it at a deadlock: let
 *   that error reject fn. fn must not end the transaction itself.
 *
 * See the guide "Locks and snatchTask", "Fences in your database".
 */
export declare function fenced<T>(
  db: unknown,
  resource: string,
  fence: bigint | string,
  fn: (tx: any) => T | Promise<T>,
  options?: FencedOptions,
): Promise<T>

/**
 * The `CREATE TABLE IF NOT EXISTS` of the fence table, as {@link fenced} creates it: `'postgres'` (`resource text`
 * primary key, `fence bigint`), or `'mysql'` for MySQL and MariaDB (`resource VARBINARY(512)` primary key, compared
 * byte for byte, `fence BIGINT`, InnoDB). For a migration, when the application's role may not create tables.
 */
export declare function fenceTableSql(dialect: 'postgres' | 'mysql', table?: string): string
