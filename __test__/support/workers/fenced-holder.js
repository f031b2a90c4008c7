'use strict'
// A process that takes the lock `config.key` (withLock, ttl 1 s) and decrements `config.sku`'s stock in
// `config.table` the way overselling code does: it reads the stock, reports { event: 'read', qty, fence }, waits for
// the parent's 'write', then writes what it read minus one, under redis-snatch/fence's `fenced`. With `config.read`
// 'before', the read is made before fenced (its write alone is fenced); 'inside', inside it (after the fence row is
// recorded). With `config.signal`, fenced gets the lock's signal. Reports { event: 'aborted' } when that signal
// aborts, then { event: 'fenced', code?, current? } (how fenced ended) and { event: 'ended', code? } (withLock).
// The parent pauses it (SIGSTOP) between its read and its write, past its lease.

const { createLocker } = require('../../..')
const { fenced } = require('redis-snatch/fence')
const { openPool, readStock, writeStock } = require('../stock')

const config = JSON.parse(process.argv[2])
const { dialect, table, sku } = config
const db = openPool(dialect, config.db)
const locker = createLocker({ url: process.env.REDIS_URL, prefix: config.prefix })
const write = new Promise((resolve) => process.on('message', (m) => m === 'write' && resolve()))

/** Reads the stock on `conn`, reports it, and waits for the parent's 'write'. */
async function read(conn, fence) {
  const qty = await readStock(dialect, conn, table, sku)
  process.send({ event: 'read', qty, fence: String(fence) })
  await write
  return qty
}

locker
  .withLock(
    config.key,
    async ({ fence, signal }) => {
      signal.addEventListener('abort', () => process.send({ event: 'aborted' }))
      const options = { table: config.fenceTable, ...(config.signal && { signal }) }
      const before = config.read === 'before' ? await read(db, fence) : undefined
      const decrement = async (tx) => {
        const qty = before ?? (await read(tx, fence))
        await writeStock(dialect, tx, table, sku, qty - 1, fence, `holder ${process.pid}`)
      }
      await fenced(db, config.key, fence, decrement, options).then(
        () => process.send({ event: 'fenced' }),
        (err) => process.send({ event: 'fenced', code: err.code, current: err.current?.toString() }),
      )
    },
    { ttl: 1000 },
  )
  .then(
    () => process.send({ event: 'ended' }),
    (err) => process.send({ event: 'ended', code: err.code }),
  )
  .finally(async () => {
    await Promise.all([locker.close(), db.end()])
    process.disconnect()
  })
