'use strict'
const path = require('node:path')
const { FilesystemNotReadyError } = require('./errors')
const { check, readingOptions } = require('./options')
const { logTo } = require('./logging')
const { asMastraComponent } = require('./mastra-base')

/** Extensions read as text whatever a filesystem's `textExtensions` add (those of `@mastra/core`). */
const TEXT_EXTENSIONS = new Set(
  (
    '.md .txt .json .yaml .yml .js .mjs .ts .tsx .jsx .py .rb .go .rs .java .c .cpp .h .hpp .sh .bash .zsh ' +
    '.html .htm .css .xml .toml .ini .env .csv .sql .graphql .gql .vue .svg .mdx .scss .sass .less .svelte ' +
    '.php .swift .kt .kts .dart .lua .r .tf .tfvars .sas .log .jsonl'
  ).split(' '),
)

/** Whether a file named `name` is text by its extension (the built-in extensions only). */
const isTextFileName = (name) => TEXT_EXTENSIONS.has(path.extname(name).toLowerCase())

/** `SAS`, `.Sas` → `.sas`. */
const normalizeExtension = (extension) => {
  const lower = extension.trim().toLowerCase()
  return lower.startsWith('.') ? lower : `.${lower}`
}

/**
 * Base class for filesystems written in JavaScript (object storage, a remote disk…). A
 * subclass sets `id`, `name`, `provider` and `status = 'pending'`, implements the file
 * methods, and its own `init()`/`destroy()`. The base gives it `_init()`/`_destroy()`:
 * concurrent calls share one run, the status moves pending → initializing → ready (or
 * `error`, with `error` holding the message) → destroying → destroyed, and the `onInit`
 * / `onDestroy` hooks run. `ensureReady()` initialises on first use.
 */
class MastraFilesystem {
  #onInit
  #onDestroy
  #initializing
  #destroying

  constructor(options) {
    readingOptions('options', () => {
      check.requiredObject(options, 'options')
      this.name = check.requiredString(options.name, 'name')
      this.#onInit = check.function(options.onInit, 'onInit')
      this.#onDestroy = check.function(options.onDestroy, 'onDestroy')
      const extensions = check.stringArray(options.textExtensions, 'textExtensions')
      this._textExtensions = new Set(extensions.map(normalizeExtension))
    })
    this.error = undefined
  }

  /** Whether `filename` is text by its extension (the built-in ones and `textExtensions`). */
  isTextFile(filename) {
    const extension = path.extname(check.requiredString(filename, 'filename')).toLowerCase()
    return isTextFileName(filename) || this._textExtensions.has(extension)
  }

  /** Initialises once: concurrent calls share the run; a destroy under way is waited for. */
  async _init() {
    if (this.status === 'ready') return
    await this.#destroying?.catch(() => {})
    this.#initializing ??= this.#runInit().finally(() => {
      this.#initializing = undefined
    })
    return this.#initializing
  }

  async #runInit() {
    this.status = 'initializing'
    this.error = undefined
    try {
      await this.init()
    } catch (err) {
      this.status = 'error'
      this.error = err instanceof Error ? err.message : String(err)
      logTo(this.logger, 'error', 'Failed to initialize filesystem', { error: err, id: this.id })
      throw err
    }
    this.status = 'ready'
    try {
      await this.#onInit?.({ filesystem: this })
    } catch (err) {
      // The filesystem is ready; a failing hook is reported, not fatal.
      logTo(this.logger, 'warn', 'onInit callback failed', { error: err })
    }
  }

  /** A subclass's own initialisation (connect, check credentials…). */
  async init() {}

  /** Initialises if needed; a `FilesystemNotReadyError` if the filesystem still is not ready. */
  async ensureReady() {
    if (this.status !== 'ready') await this._init()
    if (this.status !== 'ready') throw new FilesystemNotReadyError(this.id)
  }

  /** Destroys once (a never-initialised filesystem is only marked destroyed). */
  async _destroy() {
    if (this.status === 'destroyed') return
    if (this.status === 'pending') {
      this.status = 'destroyed'
      return
    }
    this.#destroying ??= this.#runDestroy().finally(() => {
      this.#destroying = undefined
    })
    return this.#destroying
  }

  async #runDestroy() {
    await this.#initializing?.catch(() => {})
    this.status = 'destroying'
    try {
      await this.#onDestroy?.({ filesystem: this })
      await this.destroy()
      this.status = 'destroyed'
    } catch (err) {
      this.status = 'error'
      this.error = err instanceof Error ? err.message : String(err)
      logTo(this.logger, 'error', 'Failed to destroy filesystem', { error: err, id: this.id })
      throw err
    }
  }

  /** A subclass's own clean-up. */
  async destroy() {}

  /** Where this filesystem reports failures (a Mastra logger or anything with error/warn…). */
  __setLogger(logger) {
    this.logger = logger
  }
}

asMastraComponent(MastraFilesystem)

module.exports = { MastraFilesystem, isTextFileName }
