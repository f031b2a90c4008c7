'use strict'
// A fixed amount of work, for counting instructions rather than timing it: N cycles of withfn (snatchTask) or
// uncontended (tryLock + release) at c=50 on the server of REDIS_URL, then exit. Under valgrind's callgrind, whose
// slowness must time nothing out (hence the long command timeout):
//   REDIS_URL=redis://127.0.0.1:6379 valgrind --tool=callgrind node bench/experiments/tail/count.js withfn 20000
// PKG=<path of another checkout> counts that build instead.
const { createLocker } = require(process.env.PKG || '../../..')
const scenario = process.argv[2] || 'withfn'
const total = Number(process.argv[3] || 20000)
const conc = 50

async function main() {
  const locker = createLocker({ url: process.env.REDIS_URL, prefix: `count${process.pid}:`, commandTimeout: 60000 })
  let done = 0
  const loop = async (i) => {
    const key = `k${i}`
    while (done < total) {
      done++
      if (scenario === 'withfn') await locker.snatchTask(key, async () => {})
      else await (await locker.tryLock(key)).release()
    }
  }
  await Promise.all(Array.from({ length: conc }, (_, i) => loop(i)))
  await locker.close()
  console.log(`${scenario}: ${done} cycles`)
}
main()
