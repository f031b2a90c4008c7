'use strict'
// The minimal ACL a locker needs, as the README documents it: the tests create their users with exactly that line.

const fs = require('node:fs')
const path = require('node:path')
const { redisCommand } = require('./redis-server')

/** The README's `ACL SETUSER snatch …` line, as the arguments after ACL, with `password` for the placeholder. */
function readmeAcl(password) {
  const readme = fs.readFileSync(path.join(__dirname, '..', '..', 'README.md'), 'utf8')
  const line = readme.split('\n').find((l) => l.startsWith('ACL SETUSER snatch on >'))
  if (!line) throw new Error('README.md has no `ACL SETUSER snatch on >…` line')
  return line
    .split(' ')
    .slice(1)
    .map((arg) => (arg === '>the-password' ? `>${password}` : arg))
}

/**
 * Creates the README's user `snatch` with `password` on each of `nodes` (redis:// URLs with admin credentials), with
 * `+client|setinfo` on Redis 7.2 and newer (Valkey answers as 7.2), as the README says to add there.
 */
async function createSnatchUser(nodes, password) {
  await Promise.all(
    nodes.map(async (node) => {
      const version = /redis_version:(\d+)\.(\d+)/.exec(await redisCommand(node, 'INFO', 'server'))
      const setinfo = version && (Number(version[1]) > 7 || (Number(version[1]) === 7 && Number(version[2]) >= 2))
      await redisCommand(node, 'ACL', ...readmeAcl(password), ...(setinfo ? ['+client|setinfo'] : []))
    }),
  )
}

/** The denials ACL LOG holds on each of `nodes`, all together. */
async function aclDenials(nodes) {
  const logs = await Promise.all(nodes.map((node) => redisCommand(node, 'ACL', 'LOG')))
  return logs.flat()
}

module.exports = { createSnatchUser, aclDenials }
