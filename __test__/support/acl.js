'use strict'
// The minimal ACL a locker needs, as docs/deployments.md documents it: the tests create their users with exactly that
// line.

const fs = require('node:fs')
const path = require('node:path')
const { redisCommand, compareAndDeleteOf } = require('./redis-server')

/** The documented `ACL SETUSER snatch …` line, as the arguments after ACL, with `password` for the placeholder. */
function documentedAcl(password) {
  const guide = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'deployments.md'), 'utf8')
  const line = guide.split('\n').find((l) => l.startsWith('ACL SETUSER snatch on >'))
  if (!line) throw new Error('docs/deployments.md has no `ACL SETUSER snatch on >…` line')
  return line
    .split(' ')
    .slice(1)
    .map((arg) => (arg === '>the-password' ? `>${password}` : arg))
}

/**
 * Creates the documented user `snatch` (or `username`) with `password` on each of `nodes` (redis:// URLs with admin
 * credentials), with the sharded pub/sub commands on Redis 7 and newer (unless `sharded` is false: an ACL from before
 * them), `+client|setinfo` on 6.2 and on 7.2 and newer (Valkey answers as 7.2; 7.0 and 7.1 refuse it), `+delifeq` on
 * Valkey 9 and newer and `+delex` on Redis 8.4 and newer, as the guide says to add there.
 */
async function createSnatchUser(nodes, password, { username = 'snatch', sharded = true } = {}) {
  await Promise.all(
    nodes.map(async (node) => {
      const info = await redisCommand(node, 'INFO', 'server')
      const [, major, minor] = /redis_version:(\d+)\.(\d+)/.exec(info).map(Number)
      const shardedPubsub = sharded && major >= 7 ? ['+spublish', '+ssubscribe', '+sunsubscribe'] : []
      const setinfo = major !== 7 || minor >= 2 ? ['+client|setinfo'] : []
      const own = await compareAndDeleteOf(node)
      const compareAndDelete = own ? [`+${own}`] : []
      const [setuser, , ...rules] = documentedAcl(password)
      await redisCommand(node, 'ACL', setuser, username, ...rules, ...shardedPubsub, ...setinfo, ...compareAndDelete)
    }),
  )
}

/** The denials ACL LOG holds on each of `nodes`, all together. */
async function aclDenials(nodes) {
  const logs = await Promise.all(nodes.map((node) => redisCommand(node, 'ACL', 'LOG')))
  return logs.flat()
}

module.exports = { createSnatchUser, aclDenials }
