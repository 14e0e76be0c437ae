import {
  ConfigurationError,
  checkKnownOptions,
  describeValue,
  InvalidArgumentError,
  InvalidLayoutError,
  type Layout,
  readSourceDuration,
  requireSharding,
  type Sharding,
  SOURCE_DEFAULTS,
} from '@shardflake/core'
import type { Redis, RedisOptions } from 'ioredis'

/** A Redis server for {@link RedisSource}: a `redis://` URL (the source owns that client) or a client. */
export type RedisServerInput = string | Redis

/** What {@link RedisSource} takes. */
export interface RedisSourceOptions {
  /**
   * The application's sharding (`defineSharding({ layout, logicalShards })`), the same object
   * every other source and adapter gets. It is recorded on each server under `keyPrefix` on first
   * use; a server that recorded another one is refused with `ShardingMismatchError`.
   */
  sharding: Sharding
  /**
   * One Redis server, or several independent ones (not replicas of each other). **Their order is
   * part of the configuration**: the server at index `k` hands out only sequence counters
   * `≡ k (mod servers.length)` (the classic per-server offsets and step), or, when the layout has
   * worker bits, writes `k` into the worker field. Every application process must list the same
   * servers in the same order under the same `keyPrefix`; a server refuses a different
   * configuration with `ConfigurationError`.
   *
   * URLs get a client made with {@link recommendedRedisOptions}, closed by `close()`. Clients you
   * pass are yours to close.
   */
  servers: RedisServerInput | readonly RedisServerInput[]
  /**
   * Prefix of the keys the source uses on every server: `<prefix>shard:<n>` (the last counter
   * of shard n), `<prefix>meta` (the configuration stamp) and `<prefix>sharding` (the sharding,
   * as JSON).
   * @default 'shardflake:'
   */
  keyPrefix?: string
  /**
   * How far ahead of the server's clock the time field may run, in ms. Past the per-ms capacity
   * of a shard the script borrows the next milliseconds instead of wrapping, up to this far. The
   * same allowance absorbs clock steps back, and it is the **restart floor**: a shard whose state
   * Redis lost (restart, eviction, FLUSHALL) starts again `maxDriftMs + 1` ms after the server's
   * clock, past every ID issued before the loss. All processes on one prefix must agree on it.
   * @default 1000
   */
  maxDriftMs?: number
  /**
   * The longest one call waits in a row for the clock: a server clock that stepped back further
   * than `maxDriftMs + maxWaitMs` makes calls throw `ClockMovedBackwardsError`, and a shard whose
   * capacity other callers keep using up for longer throws `ShardOverloadedError`. Nothing is
   * issued either way.
   * @default 100
   */
  maxWaitMs?: number
  /**
   * How long one server may take to answer, in ms. A server that does not answer in time is
   * treated like one that is down: the call moves on to the next server.
   * @default 2000
   */
  timeoutMs?: number
  /**
   * How long a server that failed a call is passed over while others are healthy, in ms.
   * @default 1000
   */
  retryAfterMs?: number
  /**
   * Which server a call tries first. `'failover'` uses the first healthy server of the list (one
   * shard's IDs from one source then stay ascending), `'round-robin'` spreads calls over the
   * healthy servers. Either way a call that fails on one server is retried on the next.
   * @default 'failover'
   */
  strategy?: 'failover' | 'round-robin'
  /**
   * A clock (ms since 1970) the script uses **instead of the Redis server's `TIME`**. For tests
   * that step the clock; uniqueness never depends on it, only how close the time field is to the
   * real time. @default the server's TIME
   */
  clock?: () => number
  /** Waits `ms` milliseconds. Inject one with an injected clock. @default setTimeout */
  sleep?: (ms: number) => Promise<void>
  /**
   * A floor for a shard's IDs, asked once per shard before this source's first call for it:
   * typically the largest ID already stored for that shard (`SELECT max(id) ...`). Every ID the
   * source issues for the shard is then above it, even after Redis lost its state **and** the
   * server's clock stepped back across the restart. Return `undefined` when there is none.
   *
   * @example
   * ```ts
   * floorOf: async (shard) => (await db.maxIdOfShard(shard)) ?? undefined
   * ```
   */
  floorOf?: (shard: number) => bigint | undefined | Promise<bigint | undefined>
}

/** IDs with the server that issued each (see {@link RedisSource.nextIdsWithServer}). */
export interface ServedIds {
  /** The IDs, ascending. */
  ids: bigint[]
  /** `servers[i]` is the name of the server that issued `ids[i]`. */
  servers: string[]
}

/**
 * Options for clients the source creates from URLs: fail fast when a server is gone, so the call
 * moves on to the next server instead of queueing. The source sets `connectTimeout` and
 * `commandTimeout` to its `timeoutMs`.
 */
export const recommendedRedisOptions: RedisOptions = Object.freeze({
  maxRetriesPerRequest: 0,
  commandTimeout: SOURCE_DEFAULTS.timeoutMs,
  connectTimeout: SOURCE_DEFAULTS.timeoutMs,
  retryStrategy: (times: number) => Math.min(times * 50, 500),
})

const SOURCE_OPTIONS = [
  'sharding',
  'servers',
  'keyPrefix',
  'maxDriftMs',
  'maxWaitMs',
  'timeoutMs',
  'retryAfterMs',
  'strategy',
  'clock',
  'sleep',
  'floorOf',
]

/** The options of a {@link RedisSource}, checked and with their defaults. */
export interface ResolvedOptions {
  readonly sharding: Sharding
  readonly layout: Layout
  readonly inputs: readonly RedisServerInput[]
  readonly prefix: string
  readonly maxDriftMs: number
  readonly maxWaitMs: number
  readonly timeoutMs: number
  readonly retryAfterMs: number
  readonly strategy: 'failover' | 'round-robin'
  /** Servers share a tick's sequence values (offset mode), or write their index as the worker. */
  readonly workerMode: boolean
}

/**
 * Checks a {@link RedisSourceOptions} before anything connects.
 * @throws ConfigurationError naming `logicalShards` when no sharding is given, or for bad options.
 * @throws InvalidLayoutError for a layout the script cannot serve.
 * @throws InvalidArgumentError for a duration out of its bounds.
 */
export function resolveOptions(options: RedisSourceOptions): ResolvedOptions {
  // A missing sharding first: its message names logicalShards (a layout alone is not enough).
  const sharding = requireSharding(options?.sharding, 'RedisSource')
  checkKnownOptions('RedisSource options', options, SOURCE_OPTIONS)
  for (const name of ['clock', 'sleep', 'floorOf'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new InvalidArgumentError(
        `${name} must be a function, got ${describeValue(options[name])}.`,
      )
    }
  }
  const { layout } = sharding
  layout.checkGenerating(options.clock?.() ?? Date.now())
  if (layout.order[0] !== 'time' || layout.order[3] !== 'sequence') {
    throw new InvalidLayoutError(
      'The Redis source needs the time as the highest field and the sequence as the lowest.',
    )
  }
  if (layout.timeBits + layout.sequenceBits > 52) {
    throw new InvalidLayoutError(
      `The Redis source counts time and sequence in one Lua number: timeBits + sequenceBits must be at most 52, got ${layout.timeBits + layout.sequenceBits}.`,
    )
  }
  const servers = options.servers
  const inputs: readonly RedisServerInput[] = Array.isArray(servers)
    ? servers
    : servers === undefined
      ? []
      : [servers as RedisServerInput]
  if (inputs.length === 0) throw new ConfigurationError('servers must name at least one Redis.')
  const workerMode = layout.workerBits > 0
  if (workerMode && inputs.length > layout.workerCount) {
    throw new ConfigurationError(
      `Layout ${JSON.stringify(layout.name)} has ${layout.workerCount} workers, fewer than the ${inputs.length} servers.`,
    )
  }
  if (!workerMode && inputs.length > layout.maxSequence + 1) {
    throw new ConfigurationError(
      `${inputs.length} servers cannot share the ${layout.maxSequence + 1} sequence values of a tick.`,
    )
  }
  const strategy = options.strategy ?? 'failover'
  if (strategy !== 'failover' && strategy !== 'round-robin') {
    throw new ConfigurationError(`strategy must be 'failover' or 'round-robin'.`)
  }
  const prefix = options.keyPrefix ?? 'shardflake:'
  if (typeof prefix !== 'string') throw new ConfigurationError('keyPrefix must be a string.')
  return {
    sharding,
    layout,
    inputs,
    prefix,
    maxDriftMs: readSourceDuration('maxDriftMs', options.maxDriftMs, {
      max: 3_600_000,
    }),
    maxWaitMs: readSourceDuration('maxWaitMs', options.maxWaitMs, {
      max: 60_000,
    }),
    timeoutMs: readSourceDuration('timeoutMs', options.timeoutMs, {
      min: 1,
      max: 600_000,
    }),
    retryAfterMs: readSourceDuration('retryAfterMs', options.retryAfterMs, {
      max: 3_600_000,
    }),
    strategy,
    workerMode,
  }
}
