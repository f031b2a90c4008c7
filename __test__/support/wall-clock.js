'use strict'
// Child processes whose wall clock is shifted, for the clock-skew tests: on Linux by wall-clock-shift.c, a preload
// library built here with the C compiler the Rust toolchain links with (`cc`, or CC); elsewhere by libfaketime, whose
// library LIBFAKETIME names (it also takes precedence on Linux when set).

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
const os = require('node:os')
const path = require('node:path')

let built

/** The preload library of wall-clock-shift.c, built once per process into a temp dir (removed on exit). */
function shiftLibrary() {
  if (built) return built
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'redis-snatch-wall-clock-'))
  process.on('exit', () => fs.rmSync(dir, { recursive: true, force: true }))
  const library = path.join(dir, 'wall-clock-shift.so')
  const cc = process.env.CC || 'cc'
  const source = path.join(__dirname, 'wall-clock-shift.c')
  const result = spawnSync(cc, ['-shared', '-fPIC', '-O2', '-o', library, source, '-ldl'], { encoding: 'utf8' })
  if (result.error || result.status !== 0) {
    throw new Error(`building the clock-skew tests' preload library with '${cc}' failed (set CC to a C compiler): ${result.error?.message ?? result.stderr}`)
  }
  built = library
  return library
}

/** Environment variables that shift a child process's wall clock by `ms` (its monotonic clock stays). */
function shiftedWallClock(ms) {
  const { LIBFAKETIME } = process.env
  if (LIBFAKETIME) {
    const preload = process.platform === 'darwin' ? 'DYLD_INSERT_LIBRARIES' : 'LD_PRELOAD'
    return { [preload]: LIBFAKETIME, FAKETIME: `${ms < 0 ? '-' : '+'}${Math.abs(ms) / 1000}s`, FAKETIME_DONT_FAKE_MONOTONIC: '1' }
  }
  if (process.platform !== 'linux') {
    throw new Error('the clock-skew tests shift wall clocks with a preload library built on Linux only; elsewhere install libfaketime (macOS: brew install libfaketime) and set LIBFAKETIME to its library (libfaketime.1.dylib)')
  }
  return { LD_PRELOAD: shiftLibrary(), WALL_CLOCK_SHIFT_MS: String(ms) }
}

module.exports = { shiftedWallClock }
