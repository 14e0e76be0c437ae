import { ConfigurationError, ShardOutOfRangeError } from './errors'
import type { PrefetchOptions } from './prefetch-source'
import { readShardList, type ShardList, ShardMap, type ShardRange } from './shard-map'
import type { Sharding } from './sharding'

/**
 * Where a database source's logical shards live: one database (a pool you own, or a URL the
 * source opens), ranges of logical shards to databases, or a {@link ShardMap}.
 */
export type SourceDatabases<T> = T | readonly ShardRange<T>[] | ShardMap<T>

/** The options every database source (`PostgresSource`, `MysqlSource`) shares. */
export interface DatabaseSourceOptions<T> {
  /**
   * The application's sharding (`defineSharding({ layout, logicalShards })`), the one the
   * databases were installed with: the source compares it with what each database records.
   * Required: there is no default `logicalShards`.
   */
  sharding: Sharding
  /**
   * Where the logical shards live: one database (a pool or a URL) for `shards`, ranges of
   * logical shards to databases, or a `ShardMap`. Pools you pass stay open on `close()`; pools
   * the source opened from URLs are ended.
   */
  databases: SourceDatabases<T>
  /** With one database in `databases`: the logical shards it serves. @default 'all' */
  shards?: ShardList
  /** The prefix the shards were installed with. @default 'shard_' */
  schemaPrefix?: string
  /**
   * The longest one call waits for its database, in ms. Past it the call fails with
   * `TimedOutError` and its statement is cancelled on the server.
   * @default 2000 (SOURCE_DEFAULTS.timeoutMs)
   */
  timeoutMs?: number
  /**
   * Serve single IDs and small batches from a per-shard buffer (`PrefetchBuffers`): a call the
   * buffer cannot serve takes what is left and reserves `size` more in one round trip. An ID's
   * embedded time is when it was made, up to `maxAgeMs` before the row is inserted; unused IDs
   * are dropped after `maxAgeMs` or on `close()` (gaps, never repeats).
   * @default undefined (no buffer: every call is one round trip)
   */
  prefetch?: PrefetchOptions
  /**
   * Draw through the caller's connection (`context.query`, e.g. the ORM's transaction) when one
   * is given, instead of the source's pool; a function decides per shard. Only correct when that
   * connection reaches the database holding the shard, so off unless you say so. Such calls skip
   * the prefetch buffer: they draw exactly what they return, on that connection.
   * @default false
   */
  useContextQuery?: boolean | ((shard: number) => boolean)
}

/**
 * The shard map of a source's `databases` (and `shards`, with one database).
 * @throws ShardingMismatchError for a ShardMap of another sharding.
 * @throws ConfigurationError for an empty `shards` list, or no `databases`.
 */
export function toShardMap<T>(
  sharding: Sharding,
  databases: SourceDatabases<T>,
  shards: ShardList | undefined,
): ShardMap<T> {
  if (databases instanceof ShardMap) {
    sharding.checkSame(databases.sharding, 'The shard map given as databases')
    return databases
  }
  if (Array.isArray(databases)) return new ShardMap(sharding, databases as ShardRange<T>[])
  if (typeof databases !== 'string' && (typeof databases !== 'object' || databases === null)) {
    throw new ConfigurationError(
      'A database source needs databases: a pool or URL (with shards), ranges of logical shards to pools or URLs, or a ShardMap.',
    )
  }
  const target = databases as T
  if (shards === undefined || shards === 'all') return ShardMap.single(sharding, target)
  if (typeof shards === 'object' && !Array.isArray(shards)) {
    const { from, to } = shards as { from: number; to: number }
    return new ShardMap(sharding, [{ from, to, target }])
  }
  const ranges: ShardRange<T>[] = []
  for (const shard of readShardList(shards, sharding)) {
    const last = ranges[ranges.length - 1]
    if (last && last.to === shard - 1) last.to = shard
    else ranges.push({ from: shard, to: shard, target })
  }
  if (ranges.length === 0) throw new ConfigurationError('shards must not be an empty list.')
  return new ShardMap(sharding, ranges)
}

/**
 * Throws unless the shard is one of the logical shards and in the source's shard map.
 * @throws ShardOutOfRangeError
 */
export function checkServedShard(shardMap: ShardMap<unknown>, shard: number): void {
  shardMap.sharding.checkShard(shard)
  if (!shardMap.has(shard)) {
    throw new ShardOutOfRangeError(
      shard,
      `Logical shard ${shard} is not in this source's shard map.`,
    )
  }
}

/** The `useContextQuery` option as a rule per shard. */
export function contextQueryRule(
  option: boolean | ((shard: number) => boolean) | undefined,
): (shard: number) => boolean {
  const use = option ?? false
  return typeof use === 'function' ? use : () => use
}

/**
 * The pools a source opened from URLs, one per URL, so that `close()` ends exactly those and
 * leaves alone the pools the caller passed in.
 */
export class OpenedPools<P extends { end?(): unknown }> {
  private readonly pools = new Map<string, Promise<P>>()

  constructor(private readonly open: (url: string) => Promise<P>) {}

  /** The pool for the URL, opened on first use. */
  get(url: string): Promise<P> {
    let pool = this.pools.get(url)
    if (!pool) {
      pool = this.open(url)
      this.pools.set(url, pool)
    }
    return pool
  }

  /** Ends every pool opened so far (a pool that failed to open, or to end, is passed over). */
  async close(): Promise<void> {
    const pools = [...this.pools.values()]
    this.pools.clear()
    await Promise.all(pools.map((pool) => pool.then((p) => p.end?.()).catch(() => undefined)))
  }
}
