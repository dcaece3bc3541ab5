'use strict'
// What the write tools of one createWorkspaceTools call share: a record of the files the
// model has read (read-before-write, and the modification time a write expects), and a
// per-path write lock that runs calls on the same file one at a time.
const path = require('node:path')
const { AsyncLocalStorage } = require('node:async_hooks')

/** Read records kept at most; past it the least recently used go (that file must be read again). */
const MAX_READ_RECORDS = 10_000
const DEFAULT_WRITE_LOCK_TIMEOUT_MS = 30_000
/** setTimeout's longest delay; a longer timeout is no timeout at all. */
const MAX_TIMER_MS = 2 ** 31 - 1

/** The key of a path in the read records: separators unified, dot segments resolved, no trailing slash. */
const readRecordKey = (p) => path.posix.normalize(p.replace(/\\/g, '/')).replace(/\/$/, '') || '/'
const writeLockKey = (p) => path.posix.normalize(p.replace(/\\/g, '/').replace(/^\/\/+/, '/')).replace(/\/+$/, '') || '/'

/**
 * Which file store a read was made in: two filesystems over the same directory share
 * records, different directories do not.
 */
const readScope = (filesystem) => (filesystem.basePath ? `${filesystem.provider}:${filesystem.basePath}` : filesystem.provider)

/** Whether `path` must be read (again) before a write, and why, in the words the model gets. */
function evaluateReadRecord(filePath, record, currentModifiedAt, scope) {
  if (!record) {
    return { needsReRead: true, reason: `File "${filePath}" has not been read. You must read a file before writing to it.` }
  }
  if (record.scope !== scope) {
    return {
      needsReRead: true,
      reason: `File "${filePath}" was read in a different filesystem. You must read a file before writing to it.`,
    }
  }
  if (currentModifiedAt.getTime() > record.modifiedAtRead.getTime()) {
    return {
      needsReRead: true,
      reason: `File "${filePath}" was modified since last read (read at: ${record.modifiedAtRead.toISOString()}, current: ${currentModifiedAt.toISOString()}). Please re-read the file to get the latest contents.`,
    }
  }
  return { needsReRead: false }
}

/** The files read, newest use last, at most `maxRecords` of them. */
class FileReadTracker {
  #records = new Map()
  #maxRecords

  constructor({ maxRecords = MAX_READ_RECORDS } = {}) {
    this.#maxRecords = maxRecords
  }

  get size() {
    return this.#records.size
  }

  recordRead(filePath, modifiedAt, scope) {
    const key = readRecordKey(filePath)
    this.#records.delete(key)
    this.#records.set(key, { path: key, readAt: new Date(), modifiedAtRead: modifiedAt, scope })
    for (const oldest of this.#records.keys()) {
      if (this.#records.size <= this.#maxRecords) break
      this.#records.delete(oldest)
    }
  }

  getReadRecord(filePath) {
    const key = readRecordKey(filePath)
    const record = this.#records.get(key)
    if (record) {
      this.#records.delete(key)
      this.#records.set(key, record)
    }
    return record
  }

  needsReRead(filePath, currentModifiedAt, scope) {
    return evaluateReadRecord(filePath, this.getReadRecord(filePath), currentModifiedAt, scope)
  }

  clearReadRecord(filePath) {
    this.#records.delete(readRecordKey(filePath))
  }

  clear() {
    this.#records.clear()
  }
}

/**
 * Runs functions on the same path one at a time, in call order. A holder that runs longer
 * than `timeoutMs` is rejected with a `write-lock timeout` error and the next one goes.
 * A call made while its own caller holds the path (a hook writing the file its tool call
 * writes) runs at once instead of waiting for itself.
 */
class FileWriteLock {
  #tails = new Map()
  #timeoutMs
  /** The paths the current call chain holds: key → { held }. */
  #holding = new AsyncLocalStorage()

  constructor({ timeoutMs = DEFAULT_WRITE_LOCK_TIMEOUT_MS } = {}) {
    this.#timeoutMs = timeoutMs
  }

  /** Paths with a holder or a waiter. */
  get size() {
    return this.#tails.size
  }

  withLock(filePath, fn) {
    const key = writeLockKey(filePath)
    const holding = this.#holding.getStore()
    if (holding?.get(key)?.held) return Promise.resolve().then(fn)
    const previous = this.#tails.get(key) ?? Promise.resolve()
    let release
    const tail = previous.then(() => new Promise((resolve) => (release = resolve)))
    this.#tails.set(key, tail)
    tail.then(() => {
      if (this.#tails.get(key) === tail) this.#tails.delete(key)
    })
    return previous.then(() => {
      const hold = { held: true }
      const chain = new Map(holding)
      chain.set(key, hold)
      let timer
      const timedOut = new Promise((_, reject) => {
        if (this.#timeoutMs > MAX_TIMER_MS) return
        timer = setTimeout(() => {
          reject(new Error(`write-lock timeout on "${key}" after ${this.#timeoutMs}ms`))
        }, this.#timeoutMs)
      })
      const running = this.#holding.run(chain, () => Promise.resolve().then(fn))
      return Promise.race([running, timedOut]).finally(() => {
        clearTimeout(timer)
        hold.held = false
        release()
      })
    })
  }
}

module.exports = { FileReadTracker, FileWriteLock, readScope, evaluateReadRecord, MAX_READ_RECORDS }
