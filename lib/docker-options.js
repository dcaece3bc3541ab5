'use strict'
// The options of `DockerSandbox`, checked, with their defaults and this package's safe
// ones: loaded by the first DockerSandbox made, not by the package's import.
const { SandboxOptionError } = require('./errors')
const { check, describe, egressOptions } = require('./options')

const DEFAULT_IMAGE = 'node:22-slim'
const DEFAULT_TIMEOUT = 300_000
const DEFAULT_WORKING_DIR = '/workspace'
/** Processes of a container unless `pidsLimit` says otherwise (a fork bomb stops there). */
const DEFAULT_PIDS_LIMIT = 4096
/**
 * What a shell and its usual tools need as root in a container (files of other users,
 * `chown`, dropping to another user, signals): every other capability is dropped, but those
 * `capAdd` names, unless `capDrop` is given (or the container is privileged).
 */
const SHELL_CAPABILITIES = Object.freeze(['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'KILL', 'SETGID', 'SETUID'])

/** A capability as the engine takes it in any spelling (`net_raw`, `CAP_NET_RAW`). */
const capabilityName = (cap) => cap.toUpperCase().replace(/^CAP_/, '')

/**
 * The capabilities of a container whose set this package keeps (no `capDrop`, not
 * privileged): a shell's, and those `capAdd` adds. One `capAdd` alone must not bring back
 * Docker's default set (SETFCAP and MKNOD among it, which a root container uses on a host
 * directory bound into it).
 */
function hardenedCapabilities(capAdd = []) {
  const added = new Set(capAdd.map(capabilityName).filter((cap) => !SHELL_CAPABILITIES.includes(cap)))
  return [...SHELL_CAPABILITIES, ...added]
}

const randomId = () => `docker-sandbox-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`

/** A container name Docker accepts, made from `name` as `@mastra/docker` makes it. */
function containerName(name) {
  let out = name.replace(/[^a-zA-Z0-9_.-]/g, '-')
  if (!/^[a-zA-Z0-9]/.test(out)) out = `s-${out}`
  if (out.length < 2) out = `${out}-sandbox`
  return out
}

/** A whole number of at least `least`, or undefined. */
function wholeNumber(value, name, least) {
  if (value === undefined) return undefined
  if (!Number.isSafeInteger(value) || value < least) {
    throw new SandboxOptionError(`${name} must be a whole number of at least ${least}, got ${describe(value)}`)
  }
  return value
}

/** A map of string values (`labels`, `tmpfs`, `volumes`), or undefined. */
function stringMap(value, name) {
  if (value === undefined) return undefined
  check.requiredObject(value, name)
  for (const [key, v] of Object.entries(value)) {
    if (typeof v !== 'string') throw new SandboxOptionError(`${name}.${key} must be a string, got ${describe(v)}`)
  }
  return { ...value }
}

function nonEmpty(value, name, what) {
  if (value === '') throw new SandboxOptionError(`${name} must be a non-empty string, ${what}`)
  return value
}

function absolutePath(value, name) {
  if (!value.startsWith('/')) throw new SandboxOptionError(`${name} must be an absolute path in the container, got ${describe(value)}`)
  return value
}

function ulimitsOf(value) {
  if (value === undefined) return undefined
  if (!Array.isArray(value)) throw new SandboxOptionError(`ulimits must be an array of { name, soft, hard }, got ${describe(value)}`)
  return value.map((u, i) => {
    check.requiredObject(u, `ulimits[${i}]`)
    return {
      name: check.requiredString(u.name, `ulimits[${i}].name`),
      soft: wholeNumber(u.soft, `ulimits[${i}].soft`, -1) ?? fail(`ulimits[${i}].soft`),
      hard: wholeNumber(u.hard, `ulimits[${i}].hard`, -1) ?? fail(`ulimits[${i}].hard`),
    }
  })
}

/** The container TCP ports to publish (`ports`), without repeats. */
function portsOf(value) {
  if (value === undefined) return []
  if (!Array.isArray(value)) throw new SandboxOptionError(`ports must be an array of container TCP ports, got ${describe(value)}`)
  return [
    ...new Set(
      value.map((port, i) => {
        if (!Number.isInteger(port) || port < 1 || port > 65535) {
          throw new SandboxOptionError(`ports[${i}] must be a TCP port, a whole number from 1 to 65535, got ${describe(port)}`)
        }
        return port
      }),
    ),
  ]
}

function fail(name) {
  throw new SandboxOptionError(`${name} must be given`)
}

/** `value`, an object with no field but `fields` (a misspelt one would be ignored by Docker). */
function onlyFields(value, name, fields) {
  check.requiredObject(value, name)
  for (const key of Object.keys(value)) {
    if (!fields.includes(key)) throw new SandboxOptionError(`${name}.${key} is not one of the fields ${fields.join(', ')}`)
  }
  return value
}

/** The options object of one mount type (`BindOptions` of a bind mount …), checked by `fields`. */
function mountOptions(mount, name, key, type, fields) {
  if (mount[key] === undefined) return undefined
  if (mount.Type !== type) throw new SandboxOptionError(`${name}.${key} is for a ${type} mount, but ${name}.Type is '${mount.Type}'`)
  const given = onlyFields(mount[key], `${name}.${key}`, Object.keys(fields))
  return Object.fromEntries(Object.entries(fields).map(([field, checked]) => [field, checked(given[field], `${name}.${key}.${field}`)]))
}

const PROPAGATIONS = ['private', 'rprivate', 'shared', 'rshared', 'slave', 'rslave']

/**
 * `mounts`: Docker's `HostConfig.Mounts` entries as dockerode users write them —
 * `{ Type: 'bind' | 'volume' | 'tmpfs', Source, Target, ReadOnly, BindOptions,
 * VolumeOptions, TmpfsOptions }` — checked field by field.
 */
function mountsOf(value) {
  if (value === undefined) return undefined
  if (!Array.isArray(value)) throw new SandboxOptionError(`mounts must be an array of Docker mounts ({ Type, Source, Target, ReadOnly, … }), got ${describe(value)}`)
  return value.map((mount, i) => {
    const name = `mounts[${i}]`
    onlyFields(mount, name, ['Type', 'Source', 'Target', 'ReadOnly', 'Consistency', 'BindOptions', 'VolumeOptions', 'TmpfsOptions'])
    const type = check.oneOf(mount.Type, `${name}.Type`, ['bind', 'volume', 'tmpfs']) ?? fail(`${name}.Type`)
    const target = absolutePath(check.requiredString(mount.Target, `${name}.Target`), `${name}.Target`)
    const source = check.string(mount.Source, `${name}.Source`)
    if (type === 'bind' && !source?.startsWith('/')) {
      throw new SandboxOptionError(`${name}.Source must be an absolute path on the host for a bind mount, got ${describe(source)}`)
    }
    if (type === 'tmpfs' && source !== undefined) throw new SandboxOptionError(`${name}.Source must not be given for a tmpfs mount`)
    const subpath = (value, option) => {
      if (check.string(value, option)?.startsWith('/')) throw new SandboxOptionError(`${option} must be a path relative to the volume's root, got ${describe(value)}`)
      return value
    }
    const readOnly = check.boolean(mount.ReadOnly, `${name}.ReadOnly`)
    return {
      Type: type,
      Source: source,
      Target: target,
      ReadOnly: readOnly,
      Consistency: check.string(mount.Consistency, `${name}.Consistency`),
      BindOptions: mountOptions(mount, name, 'BindOptions', 'bind', {
        Propagation: (v, option) => {
          // A mount made later under the host directory and propagated in would be writable.
          if (readOnly && v !== undefined && v !== 'rprivate') {
            throw new SandboxOptionError(`${option} of a read-only bind must be 'rprivate' (the default), got ${describe(v)}: a mount propagated into it would be writable`)
          }
          return check.oneOf(v, option, PROPAGATIONS)
        },
        NonRecursive: check.boolean,
      }),
      VolumeOptions: mountOptions(mount, name, 'VolumeOptions', 'volume', {
        NoCopy: check.boolean,
        Labels: stringMap,
        DriverConfig: (v, option) =>
          v === undefined ? undefined : (onlyFields(v, option, ['Name', 'Options']), { Name: check.string(v.Name, `${option}.Name`), Options: stringMap(v.Options, `${option}.Options`) }),
        Subpath: subpath,
      }),
      TmpfsOptions: mountOptions(mount, name, 'TmpfsOptions', 'tmpfs', {
        SizeBytes: (v, option) => wholeNumber(v, option, 0),
        Mode: (v, option) => wholeNumber(v, option, 0),
      }),
    }
  })
}

/**
 * `dockerOptions` (dockerode's connection settings): a TCP engine's `host`, `port`,
 * `protocol` and TLS material (`ca`, `cert`, `key`: PEM contents), a local engine's
 * `socketPath`, else `DOCKER_HOST` (with `DOCKER_TLS_VERIFY`, `DOCKER_CERT_PATH`), else the
 * default socket; `timeout` bounds each engine call. Types are checked here; the values
 * (ports, protocols, addresses, PEM) by the native side, once.
 */
function connectionOf(dockerOptions) {
  const d = check.object(dockerOptions, 'dockerOptions')
  const env = process.env
  return {
    socketPath: check.string(d.socketPath, 'dockerOptions.socketPath'),
    host: check.string(d.host, 'dockerOptions.host'),
    port: portOf(d.port),
    protocol: check.string(d.protocol, 'dockerOptions.protocol'),
    ca: pemOf(d.ca, 'dockerOptions.ca'),
    cert: pemOf(d.cert, 'dockerOptions.cert'),
    key: pemOf(d.key, 'dockerOptions.key'),
    dockerHost: env.DOCKER_HOST,
    dockerTlsVerify: env.DOCKER_TLS_VERIFY,
    dockerCertPath: env.DOCKER_CERT_PATH,
    // Per engine call, as dockerode's per request (default 30 s here, none in dockerode).
    engineTimeout: check.duration(d.timeout, 'dockerOptions.timeout'),
  }
}

/** `dockerOptions.port`: a number, or its digits as dockerode also takes it (the range is checked natively). */
function portOf(value) {
  if (value === undefined) return undefined
  const port = typeof value === 'string' && /^[0-9]+$/.test(value) ? Number(value) : value
  if (typeof port !== 'number' || Number.isNaN(port)) {
    throw new SandboxOptionError(`dockerOptions.port must be a TCP port number, got ${describe(value)}`)
  }
  return port
}

/** PEM contents as dockerode takes them: a string, a Buffer, or an array of them. */
function pemOf(value, name) {
  if (value === undefined) return undefined
  const parts = Array.isArray(value) ? value : [value]
  return Buffer.concat(
    parts.map((part, i) => {
      const at = Array.isArray(value) ? `${name}[${i}]` : name
      if (typeof part === 'string') return Buffer.from(`${part}\n`)
      if (part instanceof Uint8Array) return Buffer.concat([part, Buffer.from('\n')])
      throw new SandboxOptionError(`${at} must be PEM contents (a string or Buffer), got ${describe(part)}`)
    }),
  )
}

/** The options of `DockerSandbox`: those of `@mastra/docker` 0.3.0 and of every Mastra sandbox, and `allowedDomains`/`egressHosts`/`secrets`/`egressCaCertificates`. */
const DOCKER_SANDBOX_OPTIONS = Object.freeze([
  'id',
  'name',
  'image',
  'command',
  'env',
  'workingDir',
  'workingDirectory',
  'labels',
  'volumes',
  'network',
  'privileged',
  'memory',
  'memorySwap',
  'cpuShares',
  'cpuQuota',
  'cpuPeriod',
  'pidsLimit',
  'readonlyRootfs',
  'capDrop',
  'capAdd',
  'securityOpt',
  'ulimits',
  'tmpfs',
  'ports',
  'mounts',
  'user',
  'keepVolumes',
  'checkpointName',
  'seedCheckpointName',
  'timeout',
  'dockerOptions',
  'allowedDomains',
  'egressHosts',
  'secrets',
  'egressCaCertificates',
  'instructions',
  'onStart',
  'onStop',
  'onDestroy',
])

/** Every option of `@mastra/docker` 0.3.0, checked, with its defaults and this package's safe ones. */
function containerOptions(options) {
  const id = check.string(options.id, 'id') ?? randomId()
  const privileged = check.boolean(options.privileged, 'privileged') ?? false
  const capDrop = options.capDrop === undefined ? undefined : [...check.stringArray(options.capDrop, 'capDrop')]
  const capAdd = options.capAdd === undefined ? undefined : [...check.stringArray(options.capAdd, 'capAdd')]
  const securityOpt = options.securityOpt === undefined ? undefined : [...check.stringArray(options.securityOpt, 'securityOpt')]
  // An explicit `capDrop` (or `privileged`) takes the capability set out of this package's hands.
  const hardened = !privileged && capDrop === undefined
  const workingDir = absolutePath(
    check.string(options.workingDirectory, 'workingDirectory') ?? check.string(options.workingDir, 'workingDir') ?? DEFAULT_WORKING_DIR,
    options.workingDirectory === undefined ? 'workingDir' : 'workingDirectory',
  )
  const volumes = stringMap(options.volumes, 'volumes') ?? {}
  for (const [host, inside] of Object.entries(volumes)) {
    absolutePath(host, 'a host path of volumes')
    absolutePath(inside, `volumes['${host}']`)
  }
  // `command` kept the container running; the supervisor, its PID 1, does that here.
  check.stringArray(options.command, 'command')
  const image = nonEmpty(check.string(options.image, 'image') ?? DEFAULT_IMAGE, 'image', 'an image reference')
  return {
    id,
    name: containerName(check.string(options.name, 'name') ?? id),
    image,
    env: check.env(options.env, 'env'),
    workingDir,
    labels: stringMap(options.labels, 'labels') ?? {},
    volumes,
    network: check.string(options.network, 'network'),
    ...egressOptions(options),
    privileged,
    memory: wholeNumber(options.memory, 'memory', 1),
    memorySwap: wholeNumber(options.memorySwap, 'memorySwap', -1),
    cpuShares: wholeNumber(options.cpuShares, 'cpuShares', 0),
    cpuQuota: wholeNumber(options.cpuQuota, 'cpuQuota', -1),
    cpuPeriod: wholeNumber(options.cpuPeriod, 'cpuPeriod', 0),
    pidsLimit: wholeNumber(options.pidsLimit, 'pidsLimit', -1) ?? DEFAULT_PIDS_LIMIT,
    readonlyRootfs: check.boolean(options.readonlyRootfs, 'readonlyRootfs'),
    capDrop: hardened ? ['ALL'] : capDrop,
    capAdd: hardened ? hardenedCapabilities(capAdd) : capAdd,
    securityOpt: securityOpt ?? (privileged ? undefined : ['no-new-privileges']),
    ulimits: ulimitsOf(options.ulimits),
    tmpfs: stringMap(options.tmpfs, 'tmpfs'),
    ports: portsOf(options.ports),
    mounts: mountsOf(options.mounts),
    user: nonEmpty(check.string(options.user, 'user'), 'user', "a user name or uid, optionally ':group'"),
    // A generated id names nothing a later process could find the container by: it is
    // this process's, and swept once the process is dead. A given id is left to be found.
    ownedByProcess: options.id === undefined,
    keepVolumes: check.boolean(options.keepVolumes, 'keepVolumes') ?? false,
    checkpointName: check.string(options.checkpointName, 'checkpointName'),
    seedCheckpointName: check.string(options.seedCheckpointName, 'seedCheckpointName'),
    timeout: check.duration(options.timeout, 'timeout') ?? DEFAULT_TIMEOUT,
    ...connectionOf(options.dockerOptions),
  }
}

/** The HostConfig fields a reconnection compares with the options, by option. */
const OPTION_OF_FIELD = {
  Privileged: 'privileged',
  Memory: 'memory',
  MemorySwap: 'memorySwap',
  CpuShares: 'cpuShares',
  CpuQuota: 'cpuQuota',
  CpuPeriod: 'cpuPeriod',
  PidsLimit: 'pidsLimit',
  ReadonlyRootfs: 'readonlyRootfs',
  CapDrop: 'capDrop',
  CapAdd: 'capAdd',
  SecurityOpt: 'securityOpt',
  Ulimits: 'ulimits',
  Tmpfs: 'tmpfs',
}

/** Whether an option asks for anything (an empty list or map asks for nothing). */
function present(value) {
  if (value === undefined || value === null) return false
  if (typeof value === 'object') return Object.keys(value).length > 0
  return true
}

/** A setting as the engine and the options may spell it alike, for comparing. */
function comparable(field, value) {
  if (!present(value)) return undefined
  const sorted = (list) => [...list].sort()
  switch (field) {
    case 'CapAdd':
    case 'CapDrop':
      return sorted(value.map((cap) => capabilityName(String(cap))))
    case 'SecurityOpt':
      return sorted(value.map((opt) => String(opt).replace(/^no-new-privileges(?:[:=](.*))?$/i, (_, on) => `no-new-privileges=${on ?? 'true'}`)))
    case 'Ulimits':
      return sorted(value.map((u) => `${u.Name ?? u.name}=${u.Soft ?? u.soft}:${u.Hard ?? u.hard}`))
    case 'Tmpfs':
      return sorted(Object.entries(value).map(([path, opts]) => `${path} ${sorted(String(opts).split(',').map((o) => o.trim()).filter(Boolean))}`))
    default:
      return value
  }
}

const sameSetting = (field, actual, requested) => JSON.stringify(comparable(field, actual)) === JSON.stringify(comparable(field, requested))

module.exports = { DOCKER_SANDBOX_OPTIONS, OPTION_OF_FIELD, containerOptions, present, sameSetting }
