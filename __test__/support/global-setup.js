'use strict'

const { requireRedisServer, startRedis } = require('./redis-server')

/** Jest globalSetup: use REDIS_URL if set, else start a throwaway redis-server and export its URL to the workers. */
module.exports = async function globalSetup() {
  if (process.env.REDIS_URL) return
  requireRedisServer()
  const server = await startRedis()
  process.env.REDIS_URL = server.url // workers are forked after this and inherit it
  globalThis.__redisSnatchTestServer = server
}
