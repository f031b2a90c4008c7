'use strict'
// withfn c=50 for a fixed number of cycles (argv[2]) on REDIS_URL with the package at PKG: the work is fixed, so
// `perf stat` (task-clock, or instructions where the machine exposes them) compares builds without the VM's timing noise.
const { createLocker } = require(process.env.PKG)
const total = Number(process.argv[2] || 200000)
async function main() {
  const locker = createLocker({ url: process.env.REDIS_URL, prefix: `fixed${process.pid}:` })
  let left = total
  await Promise.all(Array.from({ length: 50 }, async (_, i) => {
    const key = `k${i}`
    while (left-- > 0) await locker.snatchTask(key, async () => {})
  }))
  await locker.close()
}
main()
