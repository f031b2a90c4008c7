'use strict'
// An experiment, not a library: our acquire and release scripts over a Redis socket polled by node's own libuv
// loop (bench/experiments/uv-transport, built with cargo on first use). It measures what a transport without
// hops between threads would reach (bench/README.md, "A libuv-driven transport"). Run it by name: `--libs snatch,uv,raw`.

const fs = require('node:fs')
const path = require('node:path')
const { spawnSync } = require('node:child_process')
const { randomUUID } = require('node:crypto')
const { withFnOf } = require('./with-fn')

const CRATE = path.join(__dirname, '..', 'experiments', 'uv-transport')
const LIBRARY = path.join(CRATE, 'target', 'release', 'libuv_transport_experiment.so')
const SCRIPTS = path.join(__dirname, '..', '..', 'crates', 'core', 'src', 'protocol', 'scripts')

/** The experiment's addon, built first if it is not yet. */
function load() {
  if (process.platform !== 'linux') throw new Error('the uv-transport experiment is built for Linux only')
  if (!fs.existsSync(LIBRARY)) {
    const built = spawnSync('cargo', ['build', '--release', '--manifest-path', path.join(CRATE, 'Cargo.toml')], {
      stdio: 'inherit',
    })
    if (built.status !== 0) throw new Error('building bench/experiments/uv-transport failed (it needs cargo)')
  }
  const addon = { exports: {} }
  process.dlopen(addon, LIBRARY)
  return addon.exports
}

/**
 * The experiment connected to the bench's Redis, with both scripts loaded; no `acquireWait` (no waiting).
 * `supervision` ('task', 'table' or none) stands in for lease supervision (see the experiment's src/lib.rs).
 */
async function create({ url, prefix, ttl, supervision = 'none' }) {
  const uv = load()
  const script = (name) => fs.readFileSync(path.join(SCRIPTS, name), 'utf8')
  const { hostname, port } = new URL(url)
  uv.connect(hostname, Number(port || 6379), script('fence.lua') + script('acquire.lua'), script('release.lua'), supervision)
  const tryAcquire = async (key) => {
    const lock = prefix + key
    const token = randomUUID()
    return (await uv.acquire(lock, token, ttl)) >= 0 ? { key: lock, token } : null
  }
  const release = ({ key, token }) => uv.release(key, token)
  return { tryAcquire, release, withFn: withFnOf(tryAcquire, release), close: async () => {} }
}

module.exports = { create }
