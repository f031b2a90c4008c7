'use strict'
// A process that, for `SECONDS`, locks random pairs of `KEYS` keys (in random order) with withLocks and acts in each
// section a few times, each act while the set's lease is valid; it reports every section, per key, to the parent:
// `{ sections: [{ key, fence, enter, last }] }` (process.hrtime.bigint(), one monotonic clock for every process of
// the host), then `{ done, errors }`. LOCKER: the createLocker options, as JSON.

const { createLocker } = require('../../..')

const locker = createLocker(JSON.parse(process.env.LOCKER))
const keys = Array.from({ length: Number(process.env.KEYS) }, (_, i) => `multi:${i}`)
const end = Date.now() + Number(process.env.SECONDS) * 1000
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
const errors = {}

async function main() {
  while (Date.now() < end) {
    const first = Math.floor(Math.random() * keys.length)
    const second = (first + 1 + Math.floor(Math.random() * (keys.length - 1))) % keys.length
    const pair = [keys[first], keys[second]]
    try {
      await locker.withLocks(
        pair,
        async (ctx) => {
          const enter = process.hrtime.bigint()
          let last = enter
          for (let act = 0; act < 3; act++) {
            await sleep(Math.random() * 3)
            const at = process.hrtime.bigint()
            if (ctx.signal.aborted || ctx.validUntil <= Date.now()) break
            last = at
          }
          const sections = ctx.keys.map((key, i) => ({ key, fence: String(ctx.fences[i]), enter: String(enter), last: String(last) }))
          process.send({ sections })
        },
        { wait: 10_000, ttl: 2000 },
      )
    } catch (err) {
      errors[err.code ?? err.name] = (errors[err.code ?? err.name] ?? 0) + 1
    }
  }
  await locker.close()
  process.send({ done: true, errors }, () => process.disconnect())
}

main()
