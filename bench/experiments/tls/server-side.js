'use strict'
// Redis's side of the withfn cycle over TLS and on the same server's plaintext port (`node server-side.js tls|plain
// [cycles] [loops]`, after `npm run build`): cycles/s, node's and redis-server's CPU per cycle (INFO cpu), reads and
// commands per cycle (INFO stats) and each command's share (INFO commandstats), after a warmup of 20,000 cycles. The
// server is the test harness's `startTlsRedis` with `makeCertificates()`, as in the bench's tls scenario; `loops`
// concurrent loops (50, as in the bench, unless given), each on 20 keys of its own.
const path = require('node:path')
const root = path.join(__dirname, '../../..')
const { makeCertificates, startTlsRedis } = require(path.join(root, '__test__/support/deployments'))
const { createLocker } = require(root)
const Redis = require(path.join(root, 'node_modules/ioredis'))

/** INFO all as an object. */
async function info(redis) {
  const fields = {}
  for (const line of (await redis.info('all')).split('\r\n')) {
    const colon = line.indexOf(':')
    if (colon > 0) fields[line.slice(0, colon)] = line.slice(colon + 1)
  }
  return fields
}

async function main() {
  const mode = process.argv[2] === 'plain' ? 'plain' : 'tls'
  const total = Number(process.argv[3] || 200_000)
  const loops = Number(process.argv[4] || 50)
  const certs = await makeCertificates()
  const server = await startTlsRedis({ certs })
  const admin = new Redis(server.url)
  const locker = createLocker(
    mode === 'tls' ? { url: server.tlsUrl, tls: { ca: certs.ca }, prefix: 'x:' } : { url: server.url, prefix: 'x:' },
  )
  let left = 0
  const loop = async (i) => {
    for (let n = 0; left-- > 0; n++) await locker.snatchTask(`k${i}:${n % 20}`, async () => {})
  }
  const run = (cycles) => {
    left = cycles
    return Promise.all(Array.from({ length: loops }, (_, i) => loop(i)))
  }
  await run(20_000)
  await admin.config('resetstat')
  const before = await info(admin)
  const [started, cpu] = [process.hrtime.bigint(), process.cpuUsage()]
  await run(total)
  const seconds = Number(process.hrtime.bigint() - started) / 1e9
  const node = process.cpuUsage(cpu)
  const after = await info(admin)
  const serverCpu = (fields) => Number(fields.used_cpu_user) + Number(fields.used_cpu_sys)
  const perCycle = (n) => (n / total).toFixed(2)
  const stat = (name) => Number(after[name]) - Number(before[name])
  console.log(
    `${mode}, ${loops} loops: ${Math.round(total / seconds)} cycles/s; node ${perCycle(node.user + node.system)} µs/cycle; ` +
      `redis ${perCycle(1e6 * (serverCpu(after) - serverCpu(before)))} µs/cycle`,
  )
  console.log(
    `reads/cycle ${perCycle(stat('total_reads_processed'))}, writes/cycle ${perCycle(stat('total_writes_processed'))}, ` +
      `commands/cycle ${perCycle(stat('total_commands_processed'))}`,
  )
  let commandsUsec = 0
  for (const [name, value] of Object.entries(after)) {
    if (!name.startsWith('cmdstat_') || /^cmdstat_(info|config)\b/.test(name)) continue
    const [, calls, usec] = /calls=(\d+),usec=(\d+)/.exec(value)
    commandsUsec += Number(usec)
    console.log(`  ${name.slice(8)}: ${perCycle(Number(calls))} calls, ${perCycle(Number(usec))} µs per cycle`)
  }
  console.log(`the commands: ${perCycle(commandsUsec)} µs per cycle`)
  await locker.close()
  admin.disconnect()
  await server.stop()
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
