'use strict'
// `npm test`: build the native module if it is stale, check Rust formatting and lints, run the Rust tests, the
// TypeScript type test, the Jest suite and the packaging test (scripts/pack-test.js); stops at the first failure.
// Arguments after `npm test --` go to Jest.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')
const { requireRedisServer } = require('../__test__/support/redis-server')

const root = path.join(__dirname, '..')

/** Run a command in the package root with inherited stdio; exit with its status if it fails. */
function run(header, command, args) {
  console.log(`\n== ${header}: ${[command, ...args].join(' ')}`)
  const result = spawnSync(command, args, { cwd: root, stdio: 'inherit' })
  if (result.error) throw result.error
  if (result.status !== 0) process.exit(result.status ?? 1)
}

/** Newest mtime (ms) of `target` and every file below it; 0 if it does not exist. */
function newestMtime(target) {
  let stat
  try {
    stat = fs.statSync(target)
  } catch {
    return 0
  }
  if (!stat.isDirectory()) return stat.mtimeMs
  return fs
    .readdirSync(target)
    .reduce((newest, entry) => Math.max(newest, newestMtime(path.join(target, entry))), stat.mtimeMs)
}

/** True if no built `redis-snatch.*.node` exists or one of the Rust sources is newer than it. */
function nativeModuleIsStale() {
  const built = fs.readdirSync(root).filter((name) => /^redis-snatch\..+\.node$/.test(name))
  if (built.length === 0) return true
  const builtAt = Math.max(...built.map((name) => fs.statSync(path.join(root, name)).mtimeMs))
  const crates = fs.existsSync(path.join(root, 'crates')) ? fs.readdirSync(path.join(root, 'crates')) : []
  const sources = ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs']
    .concat(crates.flatMap((crate) => [`crates/${crate}/src`, `crates/${crate}/Cargo.toml`]))
    .map((source) => path.join(root, source))
  return sources.some((source) => newestMtime(source) > builtAt)
}

function main() {
  // Both suites start throwaway redis-servers unless REDIS_URL is set: explain a missing one before a long build.
  if (!process.env.REDIS_URL) {
    try {
      requireRedisServer()
    } catch (err) {
      console.error(err.message)
      process.exit(1)
    }
  }

  if (nativeModuleIsStale()) run('build the native module', 'npm', ['run', 'build'])
  else console.log('\n== native module is up to date; skipping the build')
  run('Rust format', 'cargo', ['fmt', '--all', '--check'])
  run('Rust lints', 'cargo', ['clippy', '--workspace', '--all-targets', '--', '-D', 'warnings'])
  run('Rust tests', 'cargo', ['test', '-p', 'snatch-core'])
  run('type test', 'npx', ['tsc', '-p', '__test__/types/tsconfig.json'])
  run('Jest tests', 'npx', ['jest', ...process.argv.slice(2)])
  run('packaging test', 'node', ['scripts/pack-test.js'])
}

main()
