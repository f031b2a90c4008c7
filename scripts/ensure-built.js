'use strict'
// What `npm run demo`, `npm test` and `npm run bench` need before they start on a fresh clone: the dev dependencies
// (npm install, once) and the native module built from the Rust sources (npm run build, when missing or older than
// a source). Each step says so in one line first.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')
const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'

/** Runs `npm <args>` in the package root with inherited output; exits with its status if it fails. */
function npmRun(args) {
  const result = spawnSync(npm, args, { cwd: root, stdio: 'inherit' })
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

/** True if no built `lib/redis-snatch.*.node` exists or one of the Rust sources is newer than it. */
function nativeModuleIsStale() {
  const lib = path.join(root, 'lib')
  const built = fs.readdirSync(lib).filter((name) => /^redis-snatch\..+\.node$/.test(name))
  if (built.length === 0) return true
  const builtAt = Math.max(...built.map((name) => fs.statSync(path.join(lib, name)).mtimeMs))
  const crates = fs.existsSync(path.join(root, 'crates')) ? fs.readdirSync(path.join(root, 'crates')) : []
  const sources = ['src', 'Cargo.toml', 'Cargo.lock', 'build.rs']
    .concat(crates.flatMap((crate) => [`crates/${crate}/src`, `crates/${crate}/Cargo.toml`]))
    .map((source) => path.join(root, source))
  return sources.some((source) => newestMtime(source) > builtAt)
}

/**
 * Installs the dev dependencies if they are missing, then builds the native module if it is stale; true if it did
 * either.
 */
function ensureBuilt() {
  const install = !fs.existsSync(path.join(root, 'node_modules', '@napi-rs', 'cli', 'package.json'))
  if (install) {
    console.log('== installing the dev dependencies first (npm install), once')
    npmRun(['install', '--no-audit', '--no-fund'])
  }
  const build = nativeModuleIsStale()
  if (build) {
    console.log('== building the native module first (npm run build: cargo, about 2 minutes on a fresh clone)')
    npmRun(['run', 'build'])
  }
  return install || build
}

module.exports = { ensureBuilt }
