import { ConfigurationError, InvalidArgumentError } from './errors'
import type { Layout } from './layout'

/**
 * Where IDs come from. Every source — the in-process generator, PostgreSQL `next_id()`,
 * MySQL/MariaDB routines, ticket servers, Redis — implements this one interface, and every ORM
 * adapter uses only this interface.
 *
 * ## The contract
 *
 * 1. **Never the same ID twice.** Not across calls, not across concurrent callers, not across
 *    processes that share the source's backing store, not when a clock steps back. A source that
 *    cannot keep this promise (the clock went back further than it may wait, a server is gone)
 *    throws a {@link ShardflakeError} and returns nothing.
 * 2. **For one logical shard.** `nextId(shard)` returns an ID whose shard field is `shard`
 *    (`layout.shardOf(id) === shard`). A shard the source does not serve is refused with
 *    `ShardOutOfRangeError` before anything happens.
 * 3. **Time-ordered.** IDs of one shard from one source grow with time; a batch is ascending.
 *    (Only ticket servers, whose IDs carry no time, are exempt, and say so with `layout: undefined`.)
 * 4. **Batches in one round trip.** `nextIds(shard, n)` returns `n` distinct IDs, costing a
 *    database source one round trip, so adapters ask once per shard per `save()` or flush.
 * 5. **Exactly one source per logical shard.** Two sources that make IDs for the same shard
 *    (an in-process generator and a database function, say) can meet on the same time and
 *    sequence. Configure each logical shard on one source.
 * 6. **`bigint`, never `number`.** IDs exceed 2^53 twelve days after the epoch.
 *
 * Sources are sync or async. A {@link SyncIdSource} (`synchronous: true`) returns values
 * directly, which lets an ORM assign an ID the moment an entity is created; callers that accept
 * both just `await` the result.
 *
 * @example Using any source
 * ```ts
 * import { type IdSource, InProcessSource, instagram } from '@shardflake/core'
 *
 * async function newPostId(source: IdSource, userId: bigint): Promise<bigint> {
 *   return await source.nextId(Number(userId % 2000n))
 * }
 * await newPostId(new InProcessSource({ layout: instagram, shards: 'all' }), 31341n)
 * ```
 *
 * @example Writing a source
 * ```ts
 * import { type IdSource, instagram } from '@shardflake/core'
 *
 * const remote: IdSource = {
 *   layout: instagram,
 *   synchronous: false,
 *   async nextId(shard) {
 *     const [id] = await this.nextIds(shard, 1)
 *     return id!
 *   },
 *   async nextIds(shard, count) {
 *     const response = await fetch(`http://ids.internal/${shard}?n=${count}`)
 *     return ((await response.json()) as string[]).map(BigInt)
 *   },
 * }
 * ```
 */
export interface IdSource {
  /**
   * The layout of the IDs. `undefined` only for sources whose IDs are plain counters without
   * time or shard (ticket servers): such IDs cannot be decoded, and `sameShardAs` rules cannot
   * be used with them.
   */
  readonly layout: Layout | undefined
  /** True when `nextId` and `nextIds` return values, not promises. */
  readonly synchronous: boolean
  /**
   * How many logical shards the application uses; shard keys are reduced modulo this
   * (`userId % 2000`). `undefined` means all the layout can address.
   */
  readonly logicalShards?: number | undefined
  /** One new ID for a logical shard. */
  nextId(shard: number, context?: IdRequestContext): bigint | Promise<bigint>
  /**
   * `count` new, distinct, ascending IDs for a logical shard, in one round trip.
   * @throws InvalidArgumentError when `count` is not a positive integer.
   */
  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] | Promise<bigint[]>
  /** Releases connections, timers and buffers. The source must not be used afterwards. */
  close?(): void | Promise<void>
}

/** A source that answers synchronously (the in-process generator). */
export interface SyncIdSource extends IdSource {
  readonly synchronous: true
  nextId(shard: number, context?: IdRequestContext): bigint
  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[]
}

/**
 * What a caller may tell a source about the request. Everything is optional; sources ignore
 * what they do not use.
 */
export interface IdRequestContext {
  /**
   * Runs one SQL statement on the caller's own connection (for instance the ORM's transaction)
   * and returns its rows. A database source that serves the shard from the same database may use
   * it instead of its own pool, so a small pool cannot deadlock while the caller holds a
   * connection. Adapters pass it when the ORM gives them one.
   */
  readonly query?: (
    sql: string,
    params: readonly unknown[],
  ) => Promise<readonly Record<string, unknown>[]>
  /** Lets a caller give up waiting (a source may still have used IDs it then drops). */
  readonly signal?: AbortSignal
}

/** True when the source answers synchronously. */
export function isSyncSource(source: IdSource): source is SyncIdSource {
  return source.synchronous
}

/** The number of logical shards keys are reduced by, for a source. */
export function logicalShardsOf(source: IdSource): number {
  return source.logicalShards ?? source.layout?.shardCount ?? 2 ** 31 - 1
}

/**
 * The `logicalShards` option of a source, checked: an integer from 1 to `layout.shardCount`,
 * defaulting to `layout.shardCount`.
 * @throws ConfigurationError
 */
export function resolveLogicalShards(layout: Layout, value: number | undefined): number {
  const count = value ?? layout.shardCount
  if (!Number.isSafeInteger(count) || count < 1 || count > layout.shardCount) {
    throw new ConfigurationError(
      `logicalShards must be an integer from 1 to ${layout.shardCount}, got ${String(value)}.`,
    )
  }
  return count
}

/**
 * Throws unless `count` is a positive safe integer. Sources call it first thing in `nextIds`.
 * @throws InvalidArgumentError
 */
export function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 1) {
    throw new InvalidArgumentError(`count must be a positive integer, got ${String(count)}.`)
  }
}

/** Options of {@link allocateIds}. */
export interface AllocateOptions {
  /**
   * Ask `nextId(shard)` for a shard that needs exactly one ID, instead of `nextIds(shard, 1)`, so
   * a source with a prefetch buffer (`PostgresSource({ prefetch })`) serves single inserts
   * without a round trip.
   * @default false
   */
  readonly singleNextId?: boolean
}

/**
 * One ID for each entry of `shards` (the shard of each new row), asking the source once per
 * distinct shard. IDs come back in the order of `shards`. Synchronous for a synchronous source.
 * This is the batching every ORM adapter does before an insert.
 *
 * @example
 * ```ts
 * const ids = await allocateIds(source, [5, 9, 5]) // two nextIds calls: shard 5 (2), shard 9 (1)
 * ```
 */
export function allocateIds(
  source: SyncIdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateOptions,
): bigint[]
export function allocateIds(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateOptions,
): bigint[] | Promise<bigint[]>
export function allocateIds(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateOptions,
): bigint[] | Promise<bigint[]> {
  const positions = new Map<number, number[]>()
  shards.forEach((shard, index) => {
    const list = positions.get(shard)
    if (list) list.push(index)
    else positions.set(shard, [index])
  })
  const ids = new Array<bigint>(shards.length)
  const place = (indexes: number[], batch: readonly bigint[]) => {
    indexes.forEach((index, i) => {
      ids[index] = batch[i]!
    })
  }
  const single = options?.singleNextId === true
  if (isSyncSource(source)) {
    for (const [shard, indexes] of positions) {
      place(
        indexes,
        single && indexes.length === 1
          ? [source.nextId(shard, context)]
          : source.nextIds(shard, indexes.length, context),
      )
    }
    return ids
  }
  return Promise.all(
    [...positions].map(async ([shard, indexes]) =>
      place(
        indexes,
        single && indexes.length === 1
          ? [await source.nextId(shard, context)]
          : await source.nextIds(shard, indexes.length, context),
      ),
    ),
  ).then(() => ids)
}
