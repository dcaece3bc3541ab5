'use strict'
// Loads the addon: napi's loader (`index.js`) takes it from beside itself (a built
// checkout) or from this machine's platform package. When neither loads, napi's own error
// blames npm's handling of optional dependencies; say instead what is missing and how to
// get it.
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')

/**
 * The native addon could not be had: `code` `NATIVE_ADDON_MISSING` (not built, not
 * installed, or no package for this platform) or `NATIVE_ADDON_LOAD_FAILED` (installed,
 * but it does not load: `cause` says why). Thrown while the package loads, so it is not
 * exported: match on `code`.
 */
class NativeAddonError extends Error {
  constructor(message, code, platformPackage, cause) {
    super(message, { cause })
    this.name = 'NativeAddonError'
    this.code = code
    if (platformPackage !== undefined) this.platformPackage = platformPackage
  }
}

function unbuiltCheckout() {
  const isSource = fs.existsSync(path.join(root, 'Cargo.toml'))
  return isSource && !fs.readdirSync(root).some((name) => name.startsWith('native-workspace.') && name.endsWith('.node'))
}

function whyNotLoaded(loadError) {
  // Only a failed load reads these.
  const { version } = require('../package.json')
  const { builtPlatforms, hostPlatform, platformPackage } = require('./platform')
  if (unbuiltCheckout()) {
    return new NativeAddonError(
      `native-workspace: the native addon is not built in ${root}. Run \`npm run build\` there (it needs a Rust toolchain), or install the package from npm, which ships it prebuilt.`,
      'NATIVE_ADDON_MISSING',
      undefined,
      loadError,
    )
  }
  const platform = hostPlatform()
  const built = builtPlatforms()
  if (!built.includes(platform)) {
    return new NativeAddonError(
      `native-workspace ${version} has no native addon for ${platform}: there are packages for ${built.join(', ')}. Elsewhere, build it from a clone (README, Install).`,
      'NATIVE_ADDON_MISSING',
      undefined,
      loadError,
    )
  }
  const name = platformPackage(platform)
  let installedIn
  try {
    installedIn = path.dirname(require.resolve(`${name}/package.json`))
  } catch {
    return new NativeAddonError(
      `native-workspace: the native addon for this machine (${platform}) is in the package ${name}@${version}, which is not installed. ` +
        `From a registry, npm installs it with native-workspace unless optional dependencies are left out (--omit=optional); else \`npm install ${name}@${version}\`. ` +
        `From packed tarballs, install ${name}-${version}.tgz together with native-workspace-${version}.tgz (README, Install).`,
      'NATIVE_ADDON_MISSING',
      name,
      loadError,
    )
  }
  // Installed, yet napi's loader failed: the package's own load error says why (a damaged
  // file, a C library older than it needs...).
  try {
    require(name)
  } catch (err) {
    return new NativeAddonError(
      `native-workspace: ${name} is installed in ${installedIn}, but its addon does not load: ${err.message}`,
      'NATIVE_ADDON_LOAD_FAILED',
      name,
      err,
    )
  }
  return loadError
}

/**
 * The addon this package ships for this machine, where napi's loader would find it (beside
 * the package in a built checkout, else in the platform package), loaded without that
 * loader: 38 KB of source for every platform and layout, whose compiling and C library probe
 * cost about 1.5 ms of each import. Anything else goes to napi's loader: a host or layout we
 * ship nothing for (a musl host fails here to load the glibc build), its environment
 * overrides, and a failed load, which it reports.
 */
function shippedAddon() {
  const { env, platform, arch } = process
  if (env.NAPI_RS_NATIVE_LIBRARY_PATH || env.NAPI_RS_FORCE_WASI || env.NAPI_RS_ENFORCE_VERSION_CHECK) return undefined
  const target = { linux: `linux-${arch}-gnu`, darwin: `darwin-${arch}` }[platform]
  if (target === undefined) return undefined
  const built = path.join(root, `native-workspace.${target}.node`)
  try {
    return require(fs.existsSync(built) ? built : `native-workspace-${target}`)
  } catch {
    return undefined
  }
}

try {
  module.exports = shippedAddon() ?? require('../index.js')
} catch (err) {
  // napi's error holds, as its cause, every place it tried; its own message blames npm.
  throw whyNotLoaded(err.cause ?? err)
}
