'use strict'
// Platform names as napi-rs gives them to the platform packages (redis-snatch-<platform>).

/** The napi-rs name of this host's platform: linux-x64-gnu, linux-arm64-musl, darwin-arm64, win32-x64-msvc, … */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'win32') return `win32-${arch}-msvc`
  if (platform !== 'linux') return `${platform}-${arch}`
  const report = /** @type {{ header?: { glibcVersionRuntime?: string } } | undefined} */ (process.report?.getReport?.())
  const glibc = report?.header?.glibcVersionRuntime
  return `linux-${arch}-${glibc ? 'gnu' : 'musl'}`
}

/** The napi-rs platform name of a Rust target triple of `napi.targets` (x86_64-unknown-linux-gnu: linux-x64-gnu). */
function platformOf(triple) {
  const [cpu, , os, abi] = triple.split('-')
  const arch = { x86_64: 'x64', aarch64: 'arm64' }[cpu] ?? cpu
  if (os === 'darwin') return `darwin-${arch}`
  if (os === 'windows') return `win32-${arch}-${abi}`
  return `${os}-${arch}-${abi}`
}

module.exports = { hostPlatform, platformOf }
