'use strict'
// The addon: the one this package ships for the machine, loaded by the first use of any of
// its exports, or else napi's loader (`index.js`), at once. When it cannot be had, napi's
// own error blames npm's handling of optional dependencies; say instead what is missing and
// how to get it.
const fs = require('node:fs')
const path = require('node:path')
const { NativeAddonError } = require('./lazy')

const root = path.join(__dirname, '..')

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
 * Where the addon this package ships for this machine is, if it is there: where napi's
 * loader would find it (beside the package in a built checkout, else in the platform
 * package), found without that loader (38 KB of source for every platform and layout,
 * whose compiling and C library probe cost about 1.5 ms of each import). Anything else goes
 * to napi's loader: a host or layout we ship nothing for, and its environment overrides.
 */
function shippedAddonPath() {
  const { env, platform, arch } = process
  if (env.NAPI_RS_NATIVE_LIBRARY_PATH || env.NAPI_RS_FORCE_WASI || env.NAPI_RS_ENFORCE_VERSION_CHECK) return undefined
  const target = { linux: `linux-${arch}-gnu`, darwin: `darwin-${arch}` }[platform]
  if (target === undefined) return undefined
  const built = path.join(root, `native-workspace.${target}.node`)
  if (fs.existsSync(built)) return built
  try {
    return require.resolve(`native-workspace-${target}`)
  } catch {
    return undefined
  }
}

/** The addon through napi's loader, or a NativeAddonError that says why it cannot be had. */
function loadedByNapi() {
  try {
    return require('../index.js')
  } catch (err) {
    // napi's error holds, as its cause, every place it tried; its own message blames npm.
    throw whyNotLoaded(err.cause ?? err)
  }
}

/**
 * The shipped addon, loaded by the first use of any of its exports: loading it (about 2 ms
 * of the dynamic loader's) is not part of importing the package. A shipped addon that does
 * not load (a musl host has the glibc build) goes to napi's loader, which says why; that
 * error is then every use's, as a module loaded on first use fails (see lazy.js).
 */
function loadedOnFirstUse(shipped) {
  const load = () => {
    try {
      return require(shipped)
    } catch {
      return loadedByNapi()
    }
  }
  let addon
  let failure
  const loaded = () => {
    if (failure) throw failure
    try {
      addon ??= load()
    } catch (err) {
      failure = err
      throw err
    }
    return addon
  }
  return new Proxy({}, { get: (_, name) => loaded()[name] })
}

const shipped = shippedAddonPath()
module.exports = shipped === undefined ? loadedByNapi() : loadedOnFirstUse(shipped)
