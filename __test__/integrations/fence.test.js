'use strict'
// redis-snatch/fence against real servers: a Postgres and a MariaDB this file starts (from the system's packages,
// __test__/support/databases.js), node-postgres and mysql2 as the user's drivers, and Redis for the locks.

const { execFileSync, fork } = require('node:child_process')
const path = require('node:path')
const { createLocker, LockTimeoutError, SnatchError, StaleFenceError: MainStaleFenceError } = require('../..')
const { fenced, fenceTableSql, StaleFenceError } = require('redis-snatch/fence')
const { startMariadb, startPostgres } = require('../support/databases')
const stock = require('../support/stock')
const { uniqueKey } = require('../support/util')

const { query, openPool, openConnection, createStock, fillStock, readStock, writeStock, decrements, recordedFence } = stock

jest.setTimeout(60_000)

const STOCK = 'fence_stock'
const FENCES = 'snatch_fences'
/** The servers, by dialect: { config, stop }. */
const servers = {}
/** A pool per dialect for setting up and checking, apart from the connections under test. */
const admin = {}

beforeAll(async () => {
  ;[servers.postgres, servers.mysql] = await Promise.all([startPostgres(), startMariadb()])
  for (const dialect of ['postgres', 'mysql']) {
    admin[dialect] = openPool(dialect, servers[dialect].config)
    await createStock(dialect, admin[dialect], STOCK)
  }
}, 120_000)

afterAll(async () => {
  await Promise.all(Object.values(admin).map((pool) => pool.end()))
  await Promise.all(Object.values(servers).map((server) => server?.stop()))
})

let n = 0
/** A resource (and sku) no other test uses. */
const fresh = (name) => `${name}-${process.pid}-${n++}`

/** The session's lock wait bound: Postgres' lock_timeout, MySQL's innodb_lock_wait_timeout. */
async function lockWait(dialect, conn) {
  const text = dialect === 'postgres' ? 'SHOW lock_timeout' : 'SELECT @@innodb_lock_wait_timeout AS lock_timeout'
  return String((await query(dialect, conn, text))[0].lock_timeout)
}

/** Whether `conn` (a Client or Connection) is inside a transaction. */
async function inTransaction(dialect, conn) {
  if (dialect === 'postgres') return conn.getTransactionStatus() !== 'I'
  return Number((await query(dialect, conn, 'SELECT @@in_transaction AS t'))[0].t) === 1
}

/**
 * Resolves once a session runs fenced's statement on the fence row of `snatch_fences`, which only waiting makes last
 * (polled for 20 s; then rejects with what the sessions do). MariaDB's INNODB_TRX does not list every waiting
 * transaction: its process list is read instead.
 */
async function waitsForFenceRow(dialect) {
  const [waiting, sessions] =
    dialect === 'postgres'
      ? [
          `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE 'INSERT INTO "snatch_fences"%'`,
          'SELECT pid, state, wait_event_type, query FROM pg_stat_activity',
        ]
      : [
          "SELECT count(*) AS n FROM information_schema.PROCESSLIST WHERE COMMAND = 'Query' AND INFO LIKE 'INSERT INTO `snatch_fences`%'",
          'SELECT ID, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST',
        ]
  const deadline = Date.now() + 20_000
  while (Number((await query(dialect, admin[dialect], waiting))[0].n) === 0) {
    if (Date.now() > deadline) throw new Error(`no session waits for the fence row: ${JSON.stringify(await query(dialect, admin[dialect], sessions))}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

/** A promise and its resolve. */
function deferred() {
  let resolve
  const promise = new Promise((r) => (resolve = r))
  return { promise, resolve }
}

/** A transaction of `db` inside fenced with `fence` on `resource` that holds the fence row until `release()`. */
function holdFenceRow(db, resource, fence) {
  const inside = deferred()
  const release = deferred()
  const done = fenced(db, resource, fence, async () => {
    inside.resolve()
    await release.promise
  })
  return { inside: inside.promise, release: release.resolve, done }
}

const KINDS = [
  ['postgres', 'a node-postgres Pool', true],
  ['postgres', 'a node-postgres Client', false],
  ['mysql', 'a mysql2/promise Pool (MariaDB)', true],
  ['mysql', 'a mysql2/promise Connection (MariaDB)', false],
]

describe.each(KINDS)('%s: fenced on %s', (dialect, _name, pooled) => {
  let db
  const open = () => (pooled ? openPool(dialect, servers[dialect].config) : openConnection(dialect, servers[dialect].config))
  beforeAll(async () => {
    db = await open()
  })
  afterAll(() => db.end())

  /** After fenced settled, a Client or Connection is left outside any transaction. */
  async function leftIdle() {
    if (!pooled) expect(await inTransaction(dialect, db)).toBe(false)
  }

  test('records the fence, runs fn in the transaction and commits; an equal fence passes, a higher one too', async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const value = await fenced(db, sku, 100n, async (tx) => {
      await writeStock(dialect, tx, STOCK, sku, 9, 100n, 'first')
      // Inside the transaction: the write is not visible to others yet.
      expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(10)
      return 'written'
    })
    expect(value).toBe('written')
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(100n)
    await fenced(db, sku, 100n, (tx) => writeStock(dialect, tx, STOCK, sku, 8, 100n, 'same holder'))
    await fenced(db, sku, 101n, (tx) => writeStock(dialect, tx, STOCK, sku, 7, 101n, 'newer'))
    expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(7)
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(101n)
    expect((await decrements(dialect, admin[dialect], STOCK, sku)).map((d) => d.writer)).toEqual(['newer', 'same holder', 'first'])
    await leftIdle()
  })

  test('a lower fence: StaleFenceError (the fences exact), fn not called, nothing committed', async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    await fenced(db, sku, 200n, () => {})
    let called = false
    const err = await fenced(db, sku, 199n, () => {
      called = true
    }).catch((e) => e)
    expect(err).toBeInstanceOf(StaleFenceError)
    expect(err).toBeInstanceOf(SnatchError)
    expect(err).toMatchObject({ code: 'ERR_SNATCH_STALE_FENCE', resource: sku, fence: 199n, current: 200n })
    expect(err.message).toBe(`fence 199 of '${sku}' is stale: fence 200 is recorded for it already (a newer holder wrote); nothing was committed`)
    expect(called).toBe(false)
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(200n)
    await leftIdle()
  })

  test("fn's error rolls back its writes and the fence, and rejects fenced as it is", async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const boom = new Error('boom')
    const err = await fenced(db, sku, 300n, async (tx) => {
      await writeStock(dialect, tx, STOCK, sku, 9, 300n, 'failing')
      throw boom
    }).catch((e) => e)
    expect(err).toBe(boom)
    expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(10)
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBeNull()
    await leftIdle()
  })

  test("calls at once on one db: each its own transaction (a Client's or a Connection's one after the other)", async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const decrement = (call) => async (tx) => {
      const qty = await readStock(dialect, tx, STOCK, sku)
      await new Promise((resolve) => setTimeout(resolve, 20))
      await writeStock(dialect, tx, STOCK, sku, qty - 1, 1n, `call ${call}`)
    }
    // One holder's fence: on a pool the calls run at once, each waiting for the fence row in turn; none is lost.
    await Promise.all([0, 1, 2].map((call) => fenced(db, sku, 1n, decrement(call), { wait: 30_000 })))
    expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(7)
    const written = (await decrements(dialect, admin[dialect], STOCK, sku)).map((d) => d.writer)
    expect(written).toHaveLength(3)
    if (!pooled) expect(written).toEqual(['call 2', 'call 1', 'call 0'])
    await leftIdle()
  })

  test('fences above 2^53 round-trip exactly, as bigints or decimal strings', async () => {
    const sku = fresh('big')
    const above = 2n ** 53n + 2n // a Number makes it 2^53 + 2, and 2^53 + 1 becomes 2^53: both would compare wrong
    await fenced(db, sku, above, () => {})
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(above)
    const err = await fenced(db, sku, 2n ** 53n + 1n, () => {}).catch((e) => e)
    expect(err).toMatchObject({ code: 'ERR_SNATCH_STALE_FENCE', fence: 2n ** 53n + 1n, current: above })
    const max = 2n ** 63n - 1n
    await fenced(db, sku, max.toString(), () => {})
    await fenced(db, sku, max, () => {})
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(max)
    const stale = await fenced(db, sku, max - 1n, () => {}).catch((e) => e)
    expect(stale).toMatchObject({ code: 'ERR_SNATCH_STALE_FENCE', fence: max - 1n, current: max })
  })

  test("the signal: aborted before, nothing starts; aborted during fn, fn's writes roll back and its reason rejects", async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const before = new AbortController()
    const gone = new Error('lease lost')
    before.abort(gone)
    let called = false
    await expect(fenced(db, sku, 5n, () => (called = true), { signal: before.signal })).rejects.toBe(gone)
    expect(called).toBe(false)
    const during = new AbortController()
    const value = fenced(
      db,
      sku,
      5n,
      async (tx) => {
        await writeStock(dialect, tx, STOCK, sku, 9, 5n, 'aborted')
        during.abort(gone)
        return 'returned anyway'
      },
      { signal: during.signal },
    )
    await expect(value).rejects.toBe(gone)
    expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(10)
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBeNull()
    await leftIdle()
  })

  test("the fence row is waited for at most `wait`, then LockTimeoutError; the session's own bound is kept for fn and after", async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    // A distinctive bound of the session's own (a pool's connections keep the server's default).
    const own = pooled ? await lockWait(dialect, admin[dialect]) : dialect === 'postgres' ? '7s' : '7'
    if (!pooled) await query(dialect, db, dialect === 'postgres' ? "SET lock_timeout = '7s'" : 'SET SESSION innodb_lock_wait_timeout = 7')
    const holder = holdFenceRow(admin[dialect], sku, 10n)
    await holder.inside
    let called = false
    const err = await fenced(db, sku, 11n, () => (called = true), { wait: 1000 }).catch((e) => e)
    expect(err).toBeInstanceOf(LockTimeoutError)
    expect(err.code).toBe('ERR_SNATCH_TIMEOUT')
    expect(err.message).toMatch(new RegExp(`^the fence row of '${sku}' \\(table snatch_fences\\) was not free within ${dialect === 'postgres' ? '1000 ms' : '1 s'}`))
    expect(dialect === 'postgres' ? err.cause.code : err.cause.errno).toBe(dialect === 'postgres' ? '55P03' : 1205)
    expect(called).toBe(false)
    await leftIdle()
    holder.release()
    await holder.done
    expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBe(10n)
    // Free again: fn runs with the session's own bound, which is kept after.
    const inside = await fenced(db, sku, 11n, (tx) => lockWait(dialect, tx), { wait: 1000 })
    expect(inside).toBe(own)
    if (!pooled) expect(await lockWait(dialect, db)).toBe(own)
  })

  test('a holder inside fenced keeps the fence row: a newer one waits for it, then reads its write (no lost update)', async () => {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const read = deferred()
    const write = deferred()
    // The older holder reads, then stops (a pause) before it writes what it read minus one.
    const older = fenced(admin[dialect], sku, 10n, async (tx) => {
      const qty = await readStock(dialect, tx, STOCK, sku)
      read.resolve()
      await write.promise
      await writeStock(dialect, tx, STOCK, sku, qty - 1, 10n, 'older')
    })
    await read.promise
    const newer = fenced(
      db,
      sku,
      11n,
      async (tx) => writeStock(dialect, tx, STOCK, sku, (await readStock(dialect, tx, STOCK, sku)) - 1, 11n, 'newer'),
      { wait: 30_000 },
    )
    await waitsForFenceRow(dialect)
    write.resolve()
    await Promise.all([older, newer])
    expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(8)
    expect(await decrements(dialect, admin[dialect], STOCK, sku)).toEqual([
      { qty: 8, fence: 11n, writer: 'newer' },
      { qty: 9, fence: 10n, writer: 'older' },
    ])
  })

  test('the fence table is created when missing, by several sessions at once, as fenceTableSql says', async () => {
    const table = `fences_${process.pid}_${n++}`
    const sessions = await Promise.all(Array.from({ length: 6 }, open))
    try {
      const resources = sessions.map(() => fresh('created'))
      await Promise.all(sessions.map((s, i) => fenced(s, resources[i], BigInt(i + 1), () => {}, { table })))
      for (const [i, resource] of resources.entries()) {
        expect(await recordedFence(dialect, admin[dialect], table, resource)).toBe(BigInt(i + 1))
      }
    } finally {
      await Promise.all(sessions.map((s) => s.end()))
    }
    await query(dialect, admin[dialect], fenceTableSql(dialect, `${table}_sql`))
    expect(await columns(dialect, `${table}_sql`)).toEqual(await columns(dialect, table))
    expect(await columns(dialect, table)).toEqual(
      dialect === 'postgres'
        ? [{ name: 'resource', type: 'text', nullable: 'NO', key: 'resource' }, { name: 'fence', type: 'bigint', nullable: 'NO', key: null }]
        : [{ name: 'resource', type: 'varbinary(512)', nullable: 'NO', key: 'PRI' }, { name: 'fence', type: 'bigint(20)', nullable: 'NO', key: '' }],
    )
  })
})

/** The columns of `table`: name, type, nullable, and whether it is the primary key. */
async function columns(dialect, table) {
  const text =
    dialect === 'postgres'
      ? `SELECT c.column_name AS name, c.data_type AS type, c.is_nullable AS nullable, k.column_name AS key
         FROM information_schema.columns c
         LEFT JOIN information_schema.table_constraints t ON t.table_name = c.table_name AND t.constraint_type = 'PRIMARY KEY'
         LEFT JOIN information_schema.key_column_usage k ON k.constraint_name = t.constraint_name AND k.column_name = c.column_name
         WHERE c.table_name = ? AND c.table_schema = current_schema() ORDER BY c.ordinal_position`
      : `SELECT column_name AS name, column_type AS type, is_nullable AS nullable, column_key AS \`key\`
         FROM information_schema.columns WHERE table_name = ? AND table_schema = DATABASE() ORDER BY ordinal_position`
  return (await query(dialect, admin[dialect], text, [table])).map((c) => ({ ...c }))
}

describe.each([
  ['postgres', 'a node-postgres Client'],
  ['mysql', 'a mysql2/promise Connection (MariaDB)'],
])('%s: %s already inside a transaction', (dialect) => {
  test('is refused with ERR_SNATCH_INVALID_ARG, and its transaction is left as it was', async () => {
    const db = await openConnection(dialect, servers[dialect].config)
    try {
      const sku = fresh('sku')
      await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
      await query(dialect, db, dialect === 'postgres' ? 'BEGIN' : 'START TRANSACTION')
      await writeStock(dialect, db, STOCK, sku, 9, 0n, 'caller')
      const err = await fenced(db, sku, 1n, () => {}).catch((e) => e)
      expect(err).toBeInstanceOf(TypeError)
      expect(err.code).toBe('ERR_SNATCH_INVALID_ARG')
      expect(err.message).toMatch(/inside a transaction already: fenced runs a transaction of its own/)
      // Still the caller's transaction, uncommitted: its rollback undoes its write.
      expect(await inTransaction(dialect, db)).toBe(true)
      await query(dialect, db, 'ROLLBACK')
      expect(await readStock(dialect, admin[dialect], STOCK, sku)).toBe(10)
      expect(await recordedFence(dialect, admin[dialect], FENCES, sku)).toBeNull()
    } finally {
      await db.end()
    }
  })
})

describe('isolation levels other than the default', () => {
  /** An older holder inside fenced, a newer one waiting for the fence row, both sessions at `level`; how the newer ends. */
  async function newerAfterOlder(dialect, level) {
    const set =
      dialect === 'postgres' ? `SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL ${level}` : `SET SESSION TRANSACTION ISOLATION LEVEL ${level}`
    const [a, b] = await Promise.all([openConnection(dialect, servers[dialect].config), openConnection(dialect, servers[dialect].config)])
    try {
      for (const s of [a, b]) await query(dialect, s, set)
      const sku = fresh('sku')
      await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
      const read = deferred()
      const write = deferred()
      const older = fenced(a, sku, 10n, async (tx) => {
        const qty = await readStock(dialect, tx, STOCK, sku)
        read.resolve()
        await write.promise
        await writeStock(dialect, tx, STOCK, sku, qty - 1, 10n, 'older')
      })
      await read.promise
      const decrement = async (tx) => writeStock(dialect, tx, STOCK, sku, (await readStock(dialect, tx, STOCK, sku)) - 1, 11n, 'newer')
      const newer = fenced(b, sku, 11n, decrement, { wait: 30_000 }).catch((e) => e)
      await waitsForFenceRow(dialect)
      write.resolve()
      await older
      const ended = await newer
      expect(await inTransaction(dialect, b)).toBe(false)
      return { ended, qty: await readStock(dialect, admin[dialect], STOCK, sku), fence: await recordedFence(dialect, admin[dialect], FENCES, sku) }
    } finally {
      await Promise.all([a.end(), b.end()])
    }
  }

  test.each(['REPEATABLE READ', 'SERIALIZABLE'])('Postgres, %s: the newer holder that waited fails with a serialization failure, nothing of it committed', async (level) => {
    const { ended, qty, fence } = await newerAfterOlder('postgres', level)
    expect(ended).toMatchObject({ code: '40001' })
    expect({ qty, fence }).toEqual({ qty: 9, fence: 10n })
  })

  test('MariaDB, SERIALIZABLE: the newer holder that waited goes on, and reads the older one\'s write', async () => {
    const { ended, qty, fence } = await newerAfterOlder('mysql', 'SERIALIZABLE')
    expect(ended).toBeUndefined()
    expect({ qty, fence }).toEqual({ qty: 8, fence: 11n })
  })
})

describe.each(['postgres', 'mysql'])('%s: two processes, the first paused past its lease between its read and its write', (dialect) => {
  const children = new Set()
  afterEach(() => {
    for (const child of children) child.kill('SIGKILL')
    children.clear()
  })

  /** Forks a holder (__test__/support/workers/fenced-holder.js) with `options`; its next message of each event, on demand. */
  function holder(options) {
    const child = fork(path.join(__dirname, '..', 'support', 'workers', 'fenced-holder.js'), [JSON.stringify(options)], { env: process.env })
    children.add(child)
    const heard = []
    const waiting = []
    child.on('message', (m) => {
      const i = waiting.findIndex((w) => w.event === m.event)
      if (i >= 0) waiting.splice(i, 1)[0].resolve(m)
      else heard.push(m)
    })
    const next = (event) => {
      const i = heard.findIndex((m) => m.event === event)
      if (i >= 0) return Promise.resolve(heard.splice(i, 1)[0])
      return new Promise((resolve) => waiting.push({ event, resolve }))
    }
    return { child, next }
  }

  /** The scene: the holder read the stock (10) and is stopped; this process takes the lock once its lease lapsed. */
  async function scene(read, signal) {
    const sku = fresh('sku')
    await fillStock(dialect, admin[dialect], STOCK, [sku], 10)
    const prefix = `${uniqueKey('fence')}:`
    const options = { dialect, db: servers[dialect].config, table: STOCK, sku, key: sku, prefix, read, signal }
    const older = holder(options)
    const { qty, fence } = await older.next('read')
    expect(qty).toBe(10)
    older.child.kill('SIGSTOP')
    const locker = createLocker({ prefix })
    const pool = openPool(dialect, servers[dialect].config)
    let newerFence
    const decrement = async (tx) => {
      const left = await readStock(dialect, tx, STOCK, sku)
      await writeStock(dialect, tx, STOCK, sku, left - 1, newerFence, 'newer')
    }
    const newer = locker.withLock(
      sku,
      async (ctx) => {
        newerFence = ctx.fence
        await fenced(pool, sku, ctx.fence, decrement, { signal: ctx.signal, wait: 30_000 })
      },
      { wait: 10_000 },
    )
    const close = () => Promise.all([locker.close(), pool.end()])
    return { sku, older, olderFence: BigInt(fence), newer, newerFence: () => newerFence, close }
  }

  test('read before fenced: its fenced write is refused (StaleFenceError), nothing of it committed', async () => {
    const s = await scene('before', false)
    try {
      await s.newer
      s.older.child.kill('SIGCONT')
      s.older.child.send('write')
      expect(await s.older.next('fenced')).toEqual({ event: 'fenced', code: 'ERR_SNATCH_STALE_FENCE', current: String(s.newerFence()) })
      expect(s.newerFence()).toBeGreaterThan(s.olderFence)
      expect(await readStock(dialect, admin[dialect], STOCK, s.sku)).toBe(9)
      expect((await decrements(dialect, admin[dialect], STOCK, s.sku)).map((d) => d.writer)).toEqual(['newer'])
      expect((await s.older.next('ended')).code).toBe('ERR_SNATCH_LOCK_LOST')
    } finally {
      await s.close()
    }
  })

  test('read inside fenced, with the signal: the newer holder waits for the fence row; the stale one, woken, rolls back', async () => {
    const s = await scene('inside', true)
    try {
      await waitsForFenceRow(dialect)
      s.older.child.kill('SIGCONT')
      await s.older.next('aborted')
      s.older.child.send('write')
      expect(await s.older.next('fenced')).toEqual({ event: 'fenced', code: 'ERR_SNATCH_LOCK_LOST' })
      await s.newer
      expect(await readStock(dialect, admin[dialect], STOCK, s.sku)).toBe(9)
      expect((await decrements(dialect, admin[dialect], STOCK, s.sku)).map((d) => d.writer)).toEqual(['newer'])
    } finally {
      await s.close()
    }
  })

  test('read inside fenced, without the signal: the stale one commits first, the newer one reads its write (no lost update)', async () => {
    const s = await scene('inside', false)
    try {
      await waitsForFenceRow(dialect)
      s.older.child.kill('SIGCONT')
      s.older.child.send('write')
      expect(await s.older.next('fenced')).toEqual({ event: 'fenced' })
      await s.newer
      expect(await readStock(dialect, admin[dialect], STOCK, s.sku)).toBe(8)
      const written = await decrements(dialect, admin[dialect], STOCK, s.sku)
      expect(written.map((d) => [d.qty, d.fence, d.writer.split(' ')[0]])).toEqual([
        [8, s.newerFence(), 'newer'],
        [9, s.olderFence, 'holder'],
      ])
    } finally {
      await s.close()
    }
  })
})

describe('arguments', () => {
  let pool
  beforeAll(() => {
    pool = openPool('postgres', servers.postgres.config)
  })
  afterAll(() => pool.end())

  /** The error fenced rejects with (checked before any database is asked). */
  const refusal = (...args) => fenced(...args).catch((e) => e)

  test('db must be a node-postgres Pool or Client, or a mysql2/promise Pool or Connection', async () => {
    for (const db of [undefined, null, {}, 'postgres://', { query() {} }]) {
      expect(await refusal(db, 'r', 1n, () => {})).toMatchObject({
        name: 'TypeError',
        code: 'ERR_SNATCH_INVALID_ARG',
        message: expect.stringMatching(/^db must be a node-postgres Pool or Client, or a mysql2\/promise Pool or Connection/),
      })
    }
    const callbackPool = require('mysql2').createPool(servers.mysql.config)
    try {
      expect(await refusal(callbackPool, 'r', 1n, () => {})).toMatchObject({
        code: 'ERR_SNATCH_INVALID_ARG',
        message: "db is a mysql2 Pool of the callback API: pass its promise() (or create it from 'mysql2/promise')",
      })
    } finally {
      await callbackPool.promise().end()
    }
    const client = new (require('pg').Client)(servers.postgres.config)
    Object.defineProperty(client, 'getTransactionStatus', { value: undefined })
    expect((await refusal(client, 'r', 1n, () => {})).message).toMatch(/without getTransactionStatus\(\) \(pg < 8.21\): upgrade pg, or pass a Pool/)
  })

  test('resource, fence, fn and options are checked', async () => {
    const cases = [
      [[pool, '', 1n, () => {}], TypeError, /^resource must be a non-empty, well-formed string/],
      [[pool, 'a\0b', 1n, () => {}], TypeError, /without NUL characters/],
      [[pool, 'x\uD800', 1n, () => {}], TypeError, /well-formed/],
      [[pool, 7, 1n, () => {}], TypeError, /^resource must be a string, got a number/],
      [[pool, 'é'.repeat(257), 1n, () => {}], RangeError, /^resource is 514 bytes long; the limit is 512/],
      [[pool, 'r', 1, () => {}], TypeError, /^fence must be a bigint .* got a number \(a Number may have lost digits/],
      [[pool, 'r', '1e3', () => {}], TypeError, /^fence must be a bigint/],
      [[pool, 'r', -1n, () => {}], RangeError, /^fence must be within 0 … 2\^63 − 1/],
      [[pool, 'r', 2n ** 63n, () => {}], RangeError, /^fence must be within/],
      [[pool, 'r', 1n, 'fn'], TypeError, /^fn must be a function/],
      [[pool, 'r', 1n, () => {}, { wiat: 10 }], TypeError, /^unknown option 'wiat' \(did you mean 'wait'\?\)/],
      [[pool, 'r', 1n, () => {}, { wait: 0 }], RangeError, /^wait must be a positive integer/],
      [[pool, 'r', 1n, () => {}, { table: 'a;drop' }], TypeError, /^table must be a name of letters, digits and _/],
      [[pool, 'r', 1n, () => {}, { table: 'a.b.c' }], TypeError, /^table must be a name/],
      [[pool, 'r', 1n, () => {}, { signal: {} }], TypeError, /^signal must be an AbortSignal/],
    ]
    for (const [args, Class, message] of cases) {
      const err = await refusal(...args)
      expect(err).toBeInstanceOf(Class)
      expect(err).toMatchObject({ code: 'ERR_SNATCH_INVALID_ARG', message: expect.stringMatching(message) })
    }
  })

  test('fenceTableSql: each dialect, a schema-qualified name; another dialect refused', () => {
    expect(fenceTableSql('postgres')).toBe('CREATE TABLE IF NOT EXISTS "snatch_fences" (resource text PRIMARY KEY, fence bigint NOT NULL)')
    expect(fenceTableSql('mysql', 'app.fences')).toBe(
      'CREATE TABLE IF NOT EXISTS `app`.`fences` (resource VARBINARY(512) NOT NULL PRIMARY KEY, fence BIGINT NOT NULL) ENGINE=InnoDB',
    )
    expect(() => fenceTableSql('sqlite')).toThrow(expect.objectContaining({ code: 'ERR_SNATCH_INVALID_ARG' }))
    expect(() => fenceTableSql('postgres', 'bad name')).toThrow(/^table must be a name/)
  })

  test('one StaleFenceError class for the main entry and redis-snatch/fence; the subpath loads no driver', () => {
    expect(StaleFenceError).toBe(MainStaleFenceError)
    const code = "require('redis-snatch/fence'); console.log(Object.keys(require.cache).filter((f) => /node_modules[\\\\/](pg|mysql2)[\\\\/]/.test(f)).length)"
    expect(execFileSync(process.execPath, ['-e', code], { cwd: path.join(__dirname, '..', '..'), encoding: 'utf8' }).trim()).toBe('0')
  })
})

describe('a transaction that fn let fail (Postgres)', () => {
  test("COMMIT rolls back: fenced rejects ERR_SNATCH_ROLLED_BACK, nothing committed", async () => {
    const pool = openPool('postgres', servers.postgres.config)
    try {
      const sku = fresh('sku')
      await fillStock('postgres', admin.postgres, STOCK, [sku], 10)
      const err = await fenced(pool, sku, 1n, async (tx) => {
        await writeStock('postgres', tx, STOCK, sku, 9, 1n, 'swallowed')
        await tx.query('SELECT 1 / 0').catch(() => {})
        return 'went on'
      }).catch((e) => e)
      expect(err).toBeInstanceOf(SnatchError)
      expect(err.code).toBe('ERR_SNATCH_ROLLED_BACK')
      expect(await readStock('postgres', admin.postgres, STOCK, sku)).toBe(10)
      expect(await recordedFence('postgres', admin.postgres, FENCES, sku)).toBeNull()
    } finally {
      await pool.end()
    }
  })
})

describe('the single-statement pattern: a fence column of your own, checked with <= (docs/locks.md)', () => {
  /** The guide's statement for `dialect`: writes `qty` with `fence` unless a higher fence is in the row; rows changed. */
  async function write(dialect, db, table, sku, qty, fence) {
    if (dialect === 'postgres') {
      const { rowCount } = await db.query(`UPDATE ${table} SET qty = $1, fence = $2 WHERE sku = $3 AND fence <= $2`, [qty, fence, sku])
      return rowCount
    }
    const [{ affectedRows }] = await db.query(
      `UPDATE ${table} SET qty = ?, fence = CAST(? AS SIGNED) WHERE sku = ? AND fence <= CAST(? AS SIGNED)`,
      [qty, String(fence), sku, String(fence)],
    )
    return affectedRows
  }

  test.each(['postgres', 'mysql'])('%s: a lower fence changes nothing; an equal or higher one writes; exact above 2^53', async (dialect) => {
    const table = `fenced_column_${process.pid}`
    const db = openPool(dialect, servers[dialect].config)
    try {
      await query(dialect, db, `CREATE TABLE IF NOT EXISTS ${table} (sku VARCHAR(64) PRIMARY KEY, qty INT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)`)
      const sku = fresh('column')
      await query(dialect, db, `INSERT INTO ${table} (sku, qty) VALUES (?, 10)`, [sku])
      const at = async () => (await query(dialect, db, `SELECT qty FROM ${table} WHERE sku = ?`, [sku]))[0].qty
      expect(await write(dialect, db, table, sku, 9, 100n)).toBe(1)
      expect(await write(dialect, db, table, sku, 9, 100n)).toBe(1) // the same holder, the same values: mysql2's FOUND_ROWS counts it
      expect(await write(dialect, db, table, sku, 8, 99n)).toBe(0)
      expect(await at()).toBe(9)
      const above = 2n ** 53n + 1n
      expect(await write(dialect, db, table, sku, 7, above)).toBe(1)
      expect(await write(dialect, db, table, sku, 6, 2n ** 53n)).toBe(0) // as doubles both are 2^53
      expect(await at()).toBe(7)
    } finally {
      await db.end()
    }
  })
})
