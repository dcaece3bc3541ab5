'use strict'
// Loads the addon. In a source checkout that was never built, napi's loader blames npm's
// optional-dependency handling; say what is actually missing instead.
const fs = require('node:fs')
const path = require('node:path')

const root = path.join(__dirname, '..')

function unbuiltCheckout() {
  const isSource = fs.existsSync(path.join(root, 'Cargo.toml'))
  return isSource && !fs.readdirSync(root).some((name) => name.startsWith('native-workspace.') && name.endsWith('.node'))
}

try {
  module.exports = require('../index.js')
} catch (err) {
  if (!unbuiltCheckout()) throw err
  throw new Error(
    `native-workspace: the native addon is not built in ${root}. Run \`npm run build\` there (it needs a Rust toolchain), or install the package from npm, which ships it prebuilt.`,
    { cause: err },
  )
}
