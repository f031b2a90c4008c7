// Type test of redis-snatch/fence with node-postgres' (@types/pg) and mysql2's own types.
import pg from 'pg'
import mysql from 'mysql2/promise'
import { createLocker } from 'redis-snatch'
import { fenced, fenceTableSql, StaleFenceError } from 'redis-snatch/fence'

export async function usage(): Promise<void> {
  const locker = createLocker({ url: 'redis://127.0.0.1:6379' })
  const pool = new pg.Pool()
  const client = new pg.Client()
  const maria = mysql.createPool({ host: '127.0.0.1' })
  const connection = await mysql.createConnection({ host: '127.0.0.1' })
  await locker.withLock('stock:sku-42', async ({ fence, signal }) => {
    const left: number = await fenced(pool, 'stock:sku-42', fence, async (tx: pg.PoolClient) => {
      const { rows } = await tx.query<{ qty: number }>('SELECT qty FROM stock WHERE sku = $1', ['sku-42'])
      await tx.query('UPDATE stock SET qty = $1 WHERE sku = $2', [rows[0].qty - 1, 'sku-42'])
      return rows[0].qty - 1
    }, { signal })
    await fenced(client, 'stock:sku-42', fence, (tx: pg.Client) => tx.query('SELECT 1'))
    await fenced(maria, 'stock:sku-42', fence, async (tx: mysql.PoolConnection) => {
      const [rows] = await tx.query<mysql.RowDataPacket[]>('SELECT qty FROM stock WHERE sku = ?', ['sku-42'])
      await tx.query('UPDATE stock SET qty = ? WHERE sku = ?', [rows[0].qty - 1, 'sku-42'])
    }, { wait: 10_000, table: 'fences' })
    await fenced(connection, 'stock:sku-42', fence, (tx: mysql.Connection) => tx.query('SELECT 1'))
    void left
  })
  try {
    await fenced(pool, 'r', 1n, () => 1)
  } catch (err) {
    if (err instanceof StaleFenceError) void [err.code, err.resource, err.fence < err.current]
  }
  await pool.query(fenceTableSql('postgres'))
  await maria.query(fenceTableSql('mysql'))
}
