'use strict'
// Runs on a single Redis go by direct calls once the locker's direct socket is open (it opens in the background on
// the first run). The direct tests first make sure they are on it.

const { redisCommand } = require('./redis-server')
const { sleep } = require('./util')

/** The client name of the direct socket (core's DIRECT_CLIENT_NAME). */
const DIRECT_CLIENT_NAME = 'redis-snatch-direct'

/** The CLIENT LIST lines of the direct sockets open on the server at `url`. */
async function directClients(url) {
  const list = await redisCommand(url, 'CLIENT', 'LIST')
  return list.split('\n').filter((line) => line.includes(` name=${DIRECT_CLIENT_NAME} `))
}

/**
 * Runs snatchTask on a throwaway key until a run has gone over the direct socket of `locker` (the only locker on the
 * server at `url`): its client's last command is then the release, EVALSHA (or the server's own DELIFEQ or DELEX).
 * Throws if that does not happen within 5 s.
 */
async function onDirectSocket(locker, url) {
  for (let attempt = 0; attempt < 250; attempt++) {
    await locker.snatchTask('direct-warm-up', () => {})
    const clients = await directClients(url)
    if (clients.length === 1 && / cmd=(evalsha|delifeq|delex) /.test(clients[0])) return
    await sleep(20)
  }
  const clients = (await directClients(url)).join(' | ')
  throw new Error(`runs did not go over the direct socket (direct calls need Redis 7.0 or newer): ${clients}`)
}

module.exports = { DIRECT_CLIENT_NAME, directClients, onDirectSocket }
