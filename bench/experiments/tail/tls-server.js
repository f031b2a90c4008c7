'use strict'
// A throwaway redis-server with a TLS port and the test certificates, for ab.sh over TLS: prints
// `REDIS_URL=rediss://… TLS_CA=<file>` and runs until killed.
const { makeCertificates, startTlsRedis } = require('../../../__test__/support/deployments')

async function main() {
  const certs = await makeCertificates()
  const server = await startTlsRedis({ certs })
  console.log(`REDIS_URL=${server.tlsUrl} TLS_CA=${certs.paths.ca}`)
  process.on('SIGTERM', () => server.stop().then(() => process.exit(0)))
  setInterval(() => {}, 1 << 30)
}
main()
