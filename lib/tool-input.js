'use strict'
// What every tool of this package does with its input before running: read it as its
// (zod) schema reads it, or refuse it with a typed error saying why.
const { WorkspaceError } = require('./errors')

/** The tool's input as its schema reads it, or a `WorkspaceError` `INVALID_INPUT` saying why not. */
function validInput(schema, input, toolName) {
  let problems
  try {
    const parsed = schema.safeParse(input)
    if (parsed.success) return parsed.data
    problems = parsed.error.issues.map((i) => `${i.path.join('.') || 'input'}: ${i.message}`).join('; ')
  } catch (err) {
    // Input the validator cannot even look at (a revoked Proxy, a throwing getter).
    throw Object.assign(new WorkspaceError(`Invalid input for ${toolName}: the input could not be read`, 'INVALID_INPUT'), { cause: err })
  }
  throw new WorkspaceError(`Invalid input for ${toolName}: ${problems}`, 'INVALID_INPUT')
}

module.exports = { validInput }
