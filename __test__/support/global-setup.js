'use strict'

const { redisFromEnv } = require('./redis-server')

/** Jest globalSetup: use REDIS_URL if set, else start a throwaway redis-server and export its URL to the workers. */
module.exports = async function globalSetup() {
  const { url, server } = await redisFromEnv()
  if (!server) return
  process.env.REDIS_URL = url // workers are forked after this and inherit it
  globalThis.__redisSnatchTestServer = server
}
