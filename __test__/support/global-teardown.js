'use strict'

/** Jest globalTeardown: stop the redis-server that globalSetup started, if any. */
module.exports = async function globalTeardown() {
  const server = globalThis.__redisSnatchTestServer
  if (!server) return
  delete globalThis.__redisSnatchTestServer
  delete process.env.REDIS_URL
  await server.stop()
}
