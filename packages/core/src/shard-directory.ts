import { throwIfCancelled } from './deadline'
import { ConfigurationError, DirectoryChangedError, InvalidArgumentError } from './errors'
import { checkKnownOptions, describeValue } from './known-options'
import { ShardMap } from './shard-map'
import type { Sharding, ShardingDescription } from './sharding'
import { readDuration } from './source-options'

/**
 * Where a range of logical shards stands:
 * - `serving`: its server holds its rows and takes reads and writes;
 * - `switching`: a move to another server is finishing; its server (still the old one) answers
 *   reads, writes wait;
 * - `arriving`: the new server holds every row and answers reads; writes wait until the move
 *   marks it `serving`.
 */
export type HomeState = 'serving' | 'switching' | 'arriving'

/**
 * Logical shards `from`..`to` (both inclusive) live on `server`, in `state`.
 * @example
 * ```ts
 * import type { DirectoryEntry } from '@shardflake/core'
 *
 * const entry: DirectoryEntry = { from: 16, to: 31, server: 'b', state: 'serving' }
 * ```
 */
export interface DirectoryEntry {
  readonly from: number
  readonly to: number
  /** The server's name, one of the names the application gives its servers. */
  readonly server: string
  readonly state: HomeState
}

/**
 * What a {@link ShardDirectory} holds at one version.
 * @example
 * ```ts
 * import type { ShardDirectory } from '@shardflake/core'
 * declare const directory: ShardDirectory
 *
 * const { version, entries, maxStaleMs } = await directory.read()
 * ```
 */
export interface DirectorySnapshot {
  /** Grows by one with every change; a compare-and-set names the version it is based on. */
  readonly version: bigint
  /** The homes, sorted by `from`; shards in no entry have no home (using them is refused). */
  readonly entries: readonly DirectoryEntry[]
  /**
   * The longest any process may route with what it read, measured from when it sent the read:
   * set when the directory is created, the same for every process. A process that changes the
   * directory waits this long before relying on every process seeing the change.
   * `Infinity` for a directory that never changes.
   */
  readonly maxStaleMs: number
  /** The sharding the directory was created for. */
  readonly sharding: ShardingDescription
}

/**
 * Where the shard map lives, so that every process sees the same one and a move can change it
 * while the application runs: {@link StaticDirectory} (in code, never changes),
 * `PostgresShardDirectory` (`@shardflake/postgres`) and `MysqlShardDirectory`
 * (`@shardflake/mysql`), or your own. Each call settles within the directory's own deadline and
 * fails with a {@link ShardflakeError}.
 *
 * @example
 * ```ts
 * import type { ShardDirectory } from '@shardflake/core'
 * declare const directory: ShardDirectory
 *
 * const current = await directory.read()
 * const next = current.entries.map((entry) =>
 *   entry.from === 16 ? { ...entry, state: 'switching' as const } : entry,
 * )
 * await directory.compareAndSet(current.version, next) // DirectoryChangedError if someone was first
 * ```
 */
export interface ShardDirectory {
  /** The current snapshot. */
  read(signal?: AbortSignal): Promise<DirectorySnapshot>
  /**
   * Atomically replaces the entries when the stored version is `expected`, and returns the new
   * snapshot (version `expected + 1`).
   * @throws DirectoryChangedError when the stored version is another (nothing written).
   * @throws InvalidArgumentError, ShardOutOfRangeError for entries that cannot be a shard map.
   */
  compareAndSet(
    expected: bigint,
    entries: readonly DirectoryEntry[],
    signal?: AbortSignal,
  ): Promise<DirectorySnapshot>
  /** Ends what the directory opened (never a pool you passed in). */
  close(): Promise<void>
}

/**
 * What a database directory's `create()` did.
 * @example
 * ```ts
 * import { type CreatedDirectory, ShardMap, type Sharding } from '@shardflake/core'
 * declare const directory: { create(map: ShardMap<string>): Promise<CreatedDirectory> } // PostgresShardDirectory
 * declare const sharding: Sharding
 *
 * const { created, snapshot } = await directory.create(ShardMap.single(sharding, 'a'))
 * ```
 */
export interface CreatedDirectory {
  /** False when the directory existed already: it keeps its entries (moves change them). */
  readonly created: boolean
  /** The directory as it is now. */
  readonly snapshot: DirectorySnapshot
}

/**
 * The defaults of shard homes, so one option means the same everywhere.
 * @example
 * ```ts
 * import { HOMES_DEFAULTS } from '@shardflake/core'
 *
 * HOMES_DEFAULTS.maxStaleMs // 5000
 * ```
 */
export const HOMES_DEFAULTS = Object.freeze({
  /** The `maxStaleMs` a directory records when created without one, in ms. */
  maxStaleMs: 5000,
  /** How often `ShardHomes` re-reads the directory, in ms. */
  refreshMs: 1000,
  /** How long a write to a moving shard waits before `ShardMovingError`, in ms. */
  switchWaitMs: 2000,
})

const STATES: readonly HomeState[] = ['serving', 'switching', 'arriving']
const ENTRY_KEYS = ['from', 'to', 'server', 'state']
/** The longest server name accepted: names are labels, not connection strings. */
const MAX_SERVER_NAME = 200

/**
 * Reads a `maxStaleMs` option: `undefined` gives the default (5000); otherwise an integer number
 * of ms from 50 to one day.
 * @throws InvalidArgumentError
 * @example
 * ```ts
 * import { readMaxStaleMs } from '@shardflake/core'
 *
 * readMaxStaleMs(undefined) // 5000
 * readMaxStaleMs(10) // throws: maxStaleMs must be an integer number of ms from 50 to 86400000, got 10.
 * ```
 */
export function readMaxStaleMs(value: number | undefined): number {
  return readDuration('maxStaleMs', value, HOMES_DEFAULTS.maxStaleMs, { min: 50 })
}

/**
 * Checks a list of directory entries against the sharding: each an object with exactly `from`,
 * `to` (logical shards), `server` (a non-empty name) and `state`, no two overlapping. Directories
 * call it before they write, and on what they read.
 * @returns frozen copies, sorted by `from`.
 * @throws InvalidArgumentError for a malformed or overlapping entry, or an empty list.
 * @throws ShardOutOfRangeError for a bound outside the logical shards.
 * @example
 * ```ts
 * import { checkDirectoryEntries, defineSharding, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * checkDirectoryEntries(sharding, [
 *   { from: 32, to: 63, server: 'b', state: 'serving' },
 *   { from: 0, to: 31, server: 'a', state: 'serving' },
 * ]) // sorted: a's range first
 * ```
 */
export function checkDirectoryEntries(sharding: Sharding, entries: unknown): DirectoryEntry[] {
  if (!Array.isArray(entries)) {
    throw new InvalidArgumentError(
      `Directory entries must be an array of { from, to, server, state }, got ${describeValue(entries)}.`,
    )
  }
  if (entries.length === 0) {
    throw new InvalidArgumentError(
      'Directory entries must give at least one logical shard a home: an empty directory routes nothing.',
    )
  }
  const checked = (entries as unknown[]).map((entry, index) => {
    const where = `Directory entry ${index}`
    checkKnownOptions(where, entry, ENTRY_KEYS)
    const { from, to, server, state } = entry as Record<string, unknown>
    if (typeof server !== 'string' || server.length === 0 || server.length > MAX_SERVER_NAME) {
      throw new InvalidArgumentError(
        `${where} needs a server: the name of one of the application's servers (1 to ${MAX_SERVER_NAME} characters), got ${describeValue(server)}.`,
      )
    }
    if (!STATES.includes(state as HomeState)) {
      throw new InvalidArgumentError(
        `${where} has state ${describeValue(state)}: use 'serving', 'switching' or 'arriving'.`,
      )
    }
    return { from: from as number, to: to as number, target: server, state: state as HomeState }
  })
  // The shard map checks the bounds (integers, logical shards, in order) and the overlaps.
  const map = new ShardMap(sharding, checked)
  const states = new Map(checked.map((entry) => [entry.from, entry.state]))
  return map.ranges.map(({ from, to, target }) =>
    Object.freeze({ from, to, server: target, state: states.get(from)! }),
  )
}

/**
 * Turns what a directory stored (its version as a bigint or decimal string, `maxStaleMs`, and
 * the sharding and entries as JSON text or parsed values) into a checked {@link DirectorySnapshot}.
 * Database directories call it on every read.
 * @param what names the directory in messages.
 * @throws ShardingMismatchError when it was created for another sharding.
 * @throws ConfigurationError when what is stored is malformed (edited by hand, or not a directory).
 * @example
 * ```ts
 * import { defineSharding, instagram, toDirectorySnapshot } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const snapshot = toDirectorySnapshot(sharding, 'table shardflake_directory', {
 *   version: '3',
 *   maxStaleMs: 5000,
 *   sharding: JSON.stringify(sharding.toJSON()),
 *   entries: '[{"from":0,"to":63,"server":"a","state":"serving"}]',
 * })
 * snapshot.version // 3n
 * ```
 */
export function toDirectorySnapshot(
  sharding: Sharding,
  what: string,
  stored: { version: unknown; maxStaleMs: unknown; sharding: unknown; entries: unknown },
): DirectorySnapshot {
  const malformed = (why: string, cause?: unknown) =>
    new ConfigurationError(
      `The shard directory in ${what} is malformed (${why}): it is written only through create() and compareAndSet().`,
      cause === undefined ? undefined : { cause },
    )
  const version =
    typeof stored.version === 'bigint'
      ? stored.version
      : typeof stored.version === 'string' && /^\d{1,19}$/.test(stored.version)
        ? BigInt(stored.version)
        : typeof stored.version === 'number' && Number.isSafeInteger(stored.version)
          ? BigInt(stored.version)
          : undefined
  if (version === undefined || version < 1n) {
    throw malformed(`version ${describeValue(stored.version)}`)
  }
  const maxStaleMs =
    typeof stored.maxStaleMs === 'number'
      ? stored.maxStaleMs
      : typeof stored.maxStaleMs === 'string' && /^\d{1,15}$/.test(stored.maxStaleMs)
        ? Number(stored.maxStaleMs)
        : Number.NaN
  if (!Number.isSafeInteger(maxStaleMs) || maxStaleMs < 1) {
    throw malformed(`maxStaleMs ${describeValue(stored.maxStaleMs)}`)
  }
  const parse = (value: unknown, field: string): unknown => {
    if (typeof value !== 'string') return value
    try {
      return JSON.parse(value)
    } catch (error) {
      throw malformed(`${field} is not JSON`, error)
    }
  }
  const recorded = parse(stored.sharding, 'sharding') as ShardingDescription | null
  if (
    typeof recorded !== 'object' ||
    recorded === null ||
    typeof recorded.logicalShards !== 'number' ||
    typeof recorded.layout !== 'object' ||
    recorded.layout === null
  ) {
    throw malformed('no sharding')
  }
  sharding.checkSame(recorded, `The shard directory in ${what}`)
  let entries: DirectoryEntry[]
  try {
    entries = checkDirectoryEntries(sharding, parse(stored.entries, 'entries'))
  } catch (error) {
    if (error instanceof ConfigurationError) throw error
    throw malformed(error instanceof Error ? error.message : String(error), error)
  }
  return Object.freeze({
    version,
    entries: Object.freeze(entries),
    maxStaleMs,
    sharding: sharding.toJSON(),
  })
}

/**
 * The error a directory throws when a compare-and-set finds another version.
 * @param found the version stored now, when known.
 * @example
 * ```ts
 * import { directoryChanged } from '@shardflake/core'
 *
 * throw directoryChanged('table shardflake_directory', 4n, 5n)
 * ```
 */
export function directoryChanged(
  what: string,
  expected: bigint,
  found: bigint | undefined,
): DirectoryChangedError {
  return new DirectoryChangedError(
    `The shard directory in ${what} is at version ${found ?? 'unknown'}, not ${expected}: another process changed it first. Nothing was written; read it again and decide anew.`,
  )
}

/**
 * Throws unless `expected` is a version a compare-and-set can name (a positive bigint).
 * @throws InvalidArgumentError
 * @example
 * ```ts
 * import { checkExpectedVersion } from '@shardflake/core'
 *
 * checkExpectedVersion(3n) // 3n
 * checkExpectedVersion(3) // throws: compareAndSet needs the version it is based on, a bigint from read(), got 3.
 * ```
 */
export function checkExpectedVersion(expected: unknown): bigint {
  if (typeof expected !== 'bigint' || expected < 1n) {
    throw new InvalidArgumentError(
      `compareAndSet needs the version it is based on, a bigint from read(), got ${describeValue(expected)}.`,
    )
  }
  return expected
}

/**
 * The shard map in code, as a {@link ShardDirectory}: every shard `serving` on the server the map
 * gives, version 1, never stale, never changed (a compare-and-set is refused: moving shards
 * online needs a directory every process reads, `PostgresShardDirectory` or
 * `MysqlShardDirectory`). `ShardHomes.open` makes one when given a `ShardMap`.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram, ShardMap, StaticDirectory } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const directory = new StaticDirectory(
 *   new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * )
 * ;(await directory.read()).entries // [{ from: 0, to: 31, server: 'a', state: 'serving' }, ...]
 * ```
 */
export class StaticDirectory implements ShardDirectory {
  private readonly snapshot: DirectorySnapshot

  /**
   * @throws InvalidArgumentError when `map` is not a `ShardMap` of server names.
   */
  constructor(map: ShardMap<string>) {
    if (!(map instanceof ShardMap)) {
      throw new InvalidArgumentError(
        `StaticDirectory takes a ShardMap of server names, got ${describeValue(map)}.`,
      )
    }
    const entries = checkDirectoryEntries(
      map.sharding,
      map.ranges.map(({ from, to, target }) => ({ from, to, server: target, state: 'serving' })),
    )
    this.snapshot = Object.freeze({
      version: 1n,
      entries: Object.freeze(entries),
      maxStaleMs: Number.POSITIVE_INFINITY,
      sharding: map.sharding.toJSON(),
    })
  }

  async read(signal?: AbortSignal): Promise<DirectorySnapshot> {
    throwIfCancelled(signal, 'the static shard directory')
    return this.snapshot
  }

  /** @throws ConfigurationError always: a static directory never changes. */
  async compareAndSet(): Promise<DirectorySnapshot> {
    throw new ConfigurationError(
      'A StaticDirectory (a ShardMap in code) never changes: to move shards while the application runs, keep the map in a PostgresShardDirectory or MysqlShardDirectory, which every process reads.',
    )
  }

  async close(): Promise<void> {}
}

/** True for anything shaped like a {@link ShardDirectory}. @internal */
export function isShardDirectory(value: unknown): value is ShardDirectory {
  const candidate = value as Partial<ShardDirectory> | null | undefined
  return (
    typeof candidate === 'object' &&
    candidate !== null &&
    typeof candidate.read === 'function' &&
    typeof candidate.compareAndSet === 'function' &&
    typeof candidate.close === 'function'
  )
}
