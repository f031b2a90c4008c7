'use strict'
// NestJS 12, whose packages are ES modules only, with redis-snatch/nest imported as an ES module from an installed
// copy (support/nest12.js): @Cron once across two replica processes, @WithLock across them, the injected Locker the
// one `import { Locker } from 'redis-snatch'` names.

const path = require('node:path')
const { createLocker } = require('../..')
const { nest12Fixture } = require('../support/nest12')
const { Replicas } = require('../support/replicas')
const { uniqueKey } = require('../support/util')

jest.setTimeout(60_000)

test('NestJS 12 (ESM): @Cron once across two replicas, @WithLock excludes across them', async () => {
  const replicas = new Replicas(path.join(nest12Fixture(), 'replica.mjs'))
  const prefix = `${uniqueKey('nest12')}:`
  const locker = createLocker({ url: process.env.REDIS_URL, prefix })
  const config = { options: { url: process.env.REDIS_URL, prefix }, cron: { name: 'every-second', expr: '* * * * * *' } }
  try {
    const [a, b] = await replicas.start(2, { env: { SNATCH_NEST: JSON.stringify(config) } })
    expect(replicas.all((e) => e.event === 'ready').map((e) => e.sameLocker)).toEqual([true, true])
    const from = Date.now()
    const first = await replicas.next((e) => e.event === 'start' && e.tick > from, 'a first occurrence')
    await replicas.next((e) => e.event === 'start' && e.tick >= first.tick + 3000, 'the fourth occurrence')
    for (const tick of [0, 1000, 2000].map((ms) => first.tick + ms)) {
      expect(replicas.all((e) => e.event === 'start' && e.tick === tick)).toHaveLength(1)
    }
    const calls = [a, b].map((pid, id) => {
      replicas.send(pid, { call: 'charge', args: ['A', 300], id })
      return replicas.next((e) => e.event === 'result' && e.id === id, 'a charge')
    })
    const [x, y] = (await Promise.all(calls)).map((e) => e.value).sort((p, q) => p.entered - q.entered)
    expect(y.entered).toBeGreaterThanOrEqual(x.left)
    expect(BigInt(y.fence)).toBeGreaterThan(BigInt(x.fence))
    expect((await locker.history('every-second')).length).toBeGreaterThanOrEqual(3)
    await replicas.stop({ close: true })
  } finally {
    await replicas.killAll()
    await locker.close()
  }
})
