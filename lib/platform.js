'use strict'
// The packages that carry the native addon, one per platform, named as napi's loader
// (`index.js`) looks for them: `native-workspace-<os>-<cpu>[-<abi>]`. `npm run package`
// names them from here, and a failed load says from here which one the machine needs.
const manifest = require('../package.json')

const CPU_OF_RUST_ARCH = { x86_64: 'x64', aarch64: 'arm64' }

/** The platform a Rust target triple builds for: `x86_64-unknown-linux-gnu` → `linux-x64-gnu`. */
function platformOfTarget(triple) {
  const [arch, , os, abi] = triple.split('-')
  const cpu = CPU_OF_RUST_ARCH[arch] ?? arch
  return abi === undefined ? `${os}-${cpu}` : `${os}-${cpu}-${abi}`
}

/** This machine's platform, in the same form. */
function hostPlatform() {
  const { platform, arch } = process
  if (platform === 'linux') return `linux-${arch}-${process.report.getReport().header.glibcVersionRuntime ? 'gnu' : 'musl'}`
  if (platform === 'win32') return `win32-${arch}-msvc`
  return `${platform}-${arch}`
}

/** The platforms this version has packages for (`napi.targets` of package.json). */
const builtPlatforms = () => manifest.napi.targets.map(platformOfTarget)

const platformPackage = (platform) => `${manifest.name}-${platform}`

module.exports = { builtPlatforms, hostPlatform, platformPackage }
