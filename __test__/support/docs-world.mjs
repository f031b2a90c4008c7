// What the docs' run examples take from a user's app (`sendReport`, `flushOutbox`, `db`, as globals), made real for
// docs/run.test.js. Loaded before an example's file, which is the example as pasted (`node --import` this): it writes
// `{ act: 'ready' }` and holds the example back until the test writes a line to its stdin, so that the replicas
// start together. Each act is a JSON line appended to SNATCH_DOC_RECORD; the database is a file,
// SNATCH_DOC_STOCK, that refuses a write whose fence is not above the last write's, as the lock example says.

import fs from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'

const record = (act) => fs.appendFileSync(process.env.SNATCH_DOC_RECORD, `${JSON.stringify({ pid: process.pid, ...act })}\n`)
const stock = () => JSON.parse(fs.readFileSync(process.env.SNATCH_DOC_STOCK, 'utf8'))

globalThis.sendReport = async ({ signal }) => {
  signal.throwIfAborted()
  record({ act: 'sendReport' })
}

globalThis.flushOutbox = async ({ before, signal }) => {
  record({ act: 'flushOutbox', tick: before.getTime() })
  await sleep(50, undefined, { signal })
}

globalThis.db = {
  /** The stock of `sku`, after a round trip long enough for a second holder to come in, were one let in. */
  async readStock(sku, { signal }) {
    await sleep(20, undefined, { signal })
    return stock()[sku].stock
  },
  async writeStock(sku, value, { fence }) {
    const all = stock()
    if (BigInt(all[sku].fence) >= fence) throw new Error(`write refused: fence ${fence} is not above ${all[sku].fence}`)
    all[sku] = { stock: value, fence: String(fence) }
    fs.writeFileSync(process.env.SNATCH_DOC_STOCK, JSON.stringify(all))
    record({ act: 'writeStock', stock: value, fence: String(fence) })
  },
}

record({ act: 'ready' })
await new Promise((resolve) => process.stdin.once('data', resolve))
process.stdin.destroy()
