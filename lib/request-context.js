'use strict'
// The request context a resolver, a `sandboxCacheKey` or dynamic instructions get when
// their caller gave none: an empty one, as Mastra's own Workspace gives. Where
// @mastra/core is installed it is Mastra's `RequestContext`, which the typings promise
// there; elsewhere an object with the `get` and `has` they promise. A context made here
// stands for "no context" wherever the workspace shares or caches by request.

let RequestContextClass
const made = new WeakSet()

function emptyRequestContext() {
  if (RequestContextClass === undefined) RequestContextClass = mastraRequestContext()
  const context = RequestContextClass ? new RequestContextClass() : { get: () => undefined, has: () => false }
  made.add(context)
  return context
}

function mastraRequestContext() {
  try {
    return require('@mastra/core/request-context').RequestContext
  } catch {
    return null
  }
}

/** The request context a caller gave, as the workspace shares and caches by it: none for one made by `emptyRequestContext`. */
const givenRequestContext = (context) => (made.has(context) ? undefined : context)

module.exports = { emptyRequestContext, givenRequestContext }
