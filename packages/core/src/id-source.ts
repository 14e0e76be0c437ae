import {
  ConfigurationError,
  InvalidArgumentError,
  ShardOverloadedError,
  SourceUnavailableError,
} from './errors'
import { checkKnownOptions, describeValue } from './known-options'
import type { Sharding } from './sharding'

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
 *    throws a {@link ShardflakeError} and returns nothing. Every failure is a `ShardflakeError`,
 *    with the driver's error as `cause`.
 * 2. **For one logical shard.** `nextId(shard)` returns an ID whose shard field is `shard`
 *    (`sharding.shardOfId(id) === shard`). A shard the source does not serve is refused with
 *    `ShardOutOfRangeError` before anything happens.
 * 3. **Time-ordered.** IDs of one shard from one source grow with time; a batch is ascending.
 *    (Only ticket servers, whose IDs carry no time, are exempt, and say so with `sharding: undefined`.)
 * 4. **Batches in one round trip.** `nextIds(shard, n)` returns `n` distinct IDs, costing a
 *    database source one round trip, so adapters ask once per shard per `save()` or flush.
 *    `count` is at most {@link MAX_IDS_PER_CALL}; {@link allocateIds} splits larger batches.
 * 5. **Exactly one source per logical shard.** Two sources that make IDs for the same shard
 *    (an in-process generator and a database function, say) can meet on the same time and
 *    sequence. Configure each logical shard on one source; in-process sources refuse a second
 *    one for the same shard in one process (`ShardConflictError`).
 * 6. **`bigint`, never `number`.** IDs exceed 2^53 twelve days after the epoch.
 * 7. **`close()` releases everything the source opened** (pools it created, timers, shard
 *    claims) and leaves alone what the caller passed in (a pool you own stays open).
 *
 * Sources are sync or async. A {@link SyncIdSource} (`synchronous: true`) returns values
 * directly, which lets an ORM assign an ID the moment an entity is created; callers that accept
 * both just `await` the result.
 *
 * @example Using any source
 * ```ts
 * import { defineSharding, type IdSource, InProcessSource, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * async function newPostId(source: IdSource, userId: bigint): Promise<bigint> {
 *   return await source.nextId(sharding.shardForKey(userId))
 * }
 * await newPostId(new InProcessSource({ sharding, shards: 'all' }), 31341n)
 * ```
 *
 * @example Writing a source
 * ```ts
 * import { defineSharding, type IdSource, instagram } from '@shardflake/core'
 *
 * const remote: IdSource = {
 *   sharding: defineSharding({ layout: instagram, logicalShards: 2000 }),
 *   synchronous: false,
 *   async nextId(shard) {
 *     const [id] = await this.nextIds(shard, 1)
 *     return id!
 *   },
 *   async nextIds(shard, count) {
 *     const response = await fetch(`http://ids.internal/${shard}?n=${count}`)
 *     return ((await response.json()) as string[]).map(BigInt)
 *   },
 *   close() {},
 * }
 * ```
 */
export interface IdSource {
  /**
   * The layout and logical shards of the IDs: the same object the application hands to every
   * source and adapter. `undefined` only for sources whose IDs are plain counters without time or
   * shard (ticket servers): such IDs cannot be decoded, and shard rules do not apply to them.
   */
  readonly sharding: Sharding | undefined
  /** True when `nextId` and `nextIds` return values, not promises. */
  readonly synchronous: boolean
  /** One new ID for a logical shard. */
  nextId(shard: number, context?: IdRequestContext): bigint | Promise<bigint>
  /**
   * `count` new, distinct, ascending IDs for a logical shard, in one round trip.
   * @throws InvalidArgumentError when `count` is not an integer from 1 to {@link MAX_IDS_PER_CALL}.
   */
  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] | Promise<bigint[]>
  /**
   * Releases what the source opened (pools it created, timers, buffers, shard claims); what the
   * caller passed in stays open. The source must not be used afterwards. Safe to call twice.
   */
  close(): void | Promise<void>
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

/**
 * The most IDs one `nextIds` call may ask for. Every source refuses more before doing any work,
 * so a stray count cannot block a process or fill its memory; {@link allocateIds} splits larger
 * batches into calls of at most this many.
 */
export const MAX_IDS_PER_CALL = 1_000_000

/**
 * Throws unless `count` is an integer from 1 to {@link MAX_IDS_PER_CALL}. Sources call it first
 * thing in `nextIds`.
 * @throws InvalidArgumentError
 */
export function checkCount(count: number): void {
  if (!Number.isSafeInteger(count) || count < 1 || count > MAX_IDS_PER_CALL) {
    throw new InvalidArgumentError(
      `count must be an integer from 1 to ${MAX_IDS_PER_CALL}, got ${describeValue(count)}. Ask for larger batches in several calls (allocateIds does).`,
    )
  }
}

/**
 * Throws unless `context` is `undefined` or an {@link IdRequestContext}: an object whose `signal`,
 * when given, is an `AbortSignal` and whose `query`, when given, is a function. Sources call it
 * first thing, so a wrong value fails at once, typed, and never later in a timer.
 * @param what names the call in the message ("nextIds of shard 5").
 * @throws InvalidArgumentError
 * @example
 * ```ts
 * import { checkContext } from '@shardflake/core'
 *
 * checkContext({ signal: AbortSignal.timeout(500) }, 'nextId') // passes
 * checkContext({ signal: {} }, 'nextId') // throws InvalidArgumentError
 * ```
 */
export function checkContext(context: unknown, what: string): void {
  if (context === undefined) return
  if (typeof context !== 'object' || context === null || Array.isArray(context)) {
    throw new InvalidArgumentError(
      `The context of ${what} must be an object { query?, signal? } or undefined, got ${describeValue(context)}.`,
    )
  }
  const { signal, query } = context as { signal?: unknown; query?: unknown }
  checkSignal(signal, what)
  if (query !== undefined && typeof query !== 'function') {
    throw new InvalidArgumentError(
      `context.query of ${what} must be a function (sql, params) => rows, got ${describeValue(query)}.`,
    )
  }
}

/**
 * Throws unless `signal` is undefined or an `AbortSignal` (a caller passing `{}` would otherwise
 * meet a TypeError later, outside the call).
 * @throws InvalidArgumentError
 */
export function checkSignal(
  signal: unknown,
  what: string,
): asserts signal is AbortSignal | undefined {
  if (signal === undefined) return
  const candidate = signal as Partial<AbortSignal> | null
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.aborted !== 'boolean' ||
    typeof candidate.addEventListener !== 'function' ||
    typeof candidate.removeEventListener !== 'function'
  ) {
    throw new InvalidArgumentError(
      `The signal for ${what} must be an AbortSignal (from an AbortController), got ${describeValue(signal)}.`,
    )
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
  const candidate = source as Partial<IdSource> | null | undefined
  if (
    typeof candidate !== 'object' ||
    candidate === null ||
    typeof candidate.nextIds !== 'function' ||
    typeof candidate.nextId !== 'function'
  ) {
    throw new InvalidArgumentError(
      `allocateIds needs a source (an IdSource such as an InProcessSource or PostgresSource), got ${describeValue(source)}.`,
    )
  }
  if (!Array.isArray(shards)) {
    throw new InvalidArgumentError(
      `allocateIds takes the shard of each new row as a list, got ${describeValue(shards)}.`,
    )
  }
  checkContext(context, 'allocateIds')
  if (options !== undefined) checkKnownOptions('allocateIds options', options, ['singleNextId'])
  const positions = new Map<number, number[]>()
  shards.forEach((shard, index) => {
    const list = positions.get(shard)
    if (list) list.push(index)
    else positions.set(shard, [index])
  })
  const ids = new Array<bigint>(shards.length)
  const place = (shard: number, indexes: number[], batch: readonly bigint[]) => {
    checkBatch(source, shard, indexes.length, batch)
    indexes.forEach((index, i) => {
      ids[index] = batch[i]!
    })
  }
  const single = options?.singleNextId === true
  const requests: [number, number[]][] = []
  for (const [shard, indexes] of positions) {
    for (let from = 0; from < indexes.length; from += MAX_IDS_PER_CALL) {
      requests.push([shard, indexes.slice(from, from + MAX_IDS_PER_CALL)])
    }
  }
  if (isSyncSource(source)) {
    for (const [shard, indexes] of requests) {
      place(
        shard,
        indexes,
        single && indexes.length === 1
          ? [source.nextId(shard, context)]
          : source.nextIds(shard, indexes.length, context),
      )
    }
    return ids
  }
  return Promise.all(
    requests.map(async ([shard, indexes]) =>
      place(
        shard,
        indexes,
        single && indexes.length === 1
          ? [await source.nextId(shard, context)]
          : await source.nextIds(shard, indexes.length, context),
      ),
    ),
  ).then(() => ids)
}

/**
 * What a source answered for `count` IDs of `shard`: that many bigints, and (for a source with a
 * layout) the first and the last on that shard, so that a source serving a shard from the wrong
 * place (another shard's schema, a shard map that differs from the installation) fails before a
 * row is written instead of putting rows where no lookup finds them. Cheap: two decodes per batch.
 * @throws SourceUnavailableError for another number of IDs, or values that are not bigints.
 * @throws ConfigurationError for an ID of another logical shard.
 */
function checkBatch(source: IdSource, shard: number, count: number, batch: unknown): void {
  if (!Array.isArray(batch) || batch.length !== count) {
    throw new SourceUnavailableError(
      `The source asked for ${count} IDs of logical shard ${shard} returned ${Array.isArray(batch) ? `${batch.length}` : describeValue(batch)}. Nothing was written.`,
    )
  }
  const ends = count === 1 ? [batch[0]] : [batch[0], batch[count - 1]]
  for (const id of ends) {
    if (typeof id !== 'bigint') {
      throw new SourceUnavailableError(
        `The source asked for IDs of logical shard ${shard} returned ${describeValue(id)}, not a bigint ID. Nothing was written.`,
      )
    }
    // The layout's shard field: the logical shard asked for is in range already.
    const found = source.sharding?.layout.shardOf(id)
    if (found !== undefined && found !== shard) {
      throw new ConfigurationError(
        `The source asked for IDs of logical shard ${shard} returned ${id}, an ID of logical shard ${found}: rows with it would sit on the wrong shard. Is the source serving shard ${shard} from the place installed for it (its shard map, schema prefix or database)? Nothing was written.`,
      )
    }
  }
}

/**
 * A source that can hand out a batch's IDs ascending in row order ({@link InProcessSource} and
 * `LeasedSource`). See {@link allocateAscending}.
 */
export interface AscendingIdSource extends SyncIdSource {
  /**
   * IDs for `shards`, ascending in row order (within each group), or `undefined` when they do
   * not fit the source's time window; then nothing was issued.
   */
  nextIdsAscending(
    shards: readonly number[],
    maxLagMs?: number,
    groups?: readonly unknown[],
  ): bigint[] | undefined
}

/** True when the source can hand out a batch's IDs ascending in row order. */
export function isAscendingSource(source: IdSource): source is AscendingIdSource {
  return (
    source.synchronous &&
    typeof (source as Partial<AscendingIdSource>).nextIdsAscending === 'function'
  )
}

/** Options of {@link allocateAscending}. */
export interface AllocateAscendingOptions extends AllocateOptions {
  /**
   * How far behind the clock the batch's first ID may be, in ms. An ascending batch spans about
   * one time unit per row whose shard is below the previous row's; it takes the units the source
   * left unused behind the clock, as a prefetched ID carries the time it was fetched.
   * @default 1000
   */
  readonly maxLagMs?: number
  /**
   * A group for each row, such as its table: IDs ascend within each group, which needs fewer
   * time units than one order across all rows. Rows of one table must share a group.
   * @default every row in one group
   */
  readonly groups?: readonly unknown[]
  /**
   * When the batch does not fit between `maxLagMs` behind the clock and the source's drift
   * allowance ahead of it (a source busy with batches back to back), or the source cannot order
   * a batch (a database source): `true` hands out IDs per shard as {@link allocateIds} does
   * (still distinct and ascending per shard; a B-tree grows less compactly), `false` throws
   * `ShardOverloadedError` and issues nothing.
   * @default true
   */
  readonly fallback?: boolean
}

/**
 * One ID for each entry of `shards` (the shard of each new row), **ascending in row order** when
 * the source can do it, so a multi-row INSERT appends to the primary key's B-tree as with
 * AUTO_INCREMENT instead of splitting pages in the middle (InnoDB clusters rows by primary key;
 * interleaved shards leave leaf pages about half full).
 *
 * Why it is not free: the shard bits sit under the time bits, so a row whose shard is below the
 * previous row's needs the next millisecond. 1000 rows over shards in random order span about
 * 470-500 ms. An in-process or leased source ends the batch at its clock and takes those
 * milliseconds from the ones it left unused behind it (back to `maxLagMs`, never before the
 * source first read its clock), and never runs ahead of its `maxDriftMs`. So it keeps up with
 * about 2 rows per ms of such steps; a source busy with large batches back to back has no room
 * and falls back to per-shard order. Database sources always do (sort the rows by ID instead
 * where the ORM lets you).
 *
 * @example
 * ```ts
 * import { allocateAscending, defineSharding, InProcessSource, instagram } from '@shardflake/core'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 16 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const ids = allocateAscending(source, [9, 3, 12, 3]) // ascending when the source had room
 * ```
 * @throws ShardOverloadedError with `fallback: false` when the batch cannot be ordered.
 */
export function allocateAscending(
  source: SyncIdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateAscendingOptions,
): bigint[]
export function allocateAscending(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateAscendingOptions,
): bigint[] | Promise<bigint[]>
export function allocateAscending(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
  options?: AllocateAscendingOptions,
): bigint[] | Promise<bigint[]> {
  if (options !== undefined) {
    checkKnownOptions('allocateAscending options', options, [
      'singleNextId',
      'maxLagMs',
      'groups',
      'fallback',
    ])
  }
  const { maxLagMs, groups, fallback = true, singleNextId } = options ?? {}
  const perShard = () =>
    allocateIds(source, shards, context, singleNextId === undefined ? undefined : { singleNextId })
  if (typeof source !== 'object' || source === null || !Array.isArray(shards)) return perShard()
  checkContext(context, 'allocateAscending')
  if (groups !== undefined && !Array.isArray(groups)) {
    throw new InvalidArgumentError(
      `allocateAscending groups must be a list (a group for each row), got ${describeValue(groups)}.`,
    )
  }
  const ordered =
    isAscendingSource(source) && shards.length <= MAX_IDS_PER_CALL
      ? source.nextIdsAscending(shards, maxLagMs, groups)
      : undefined
  if (ordered) return ordered
  if (fallback === false && !isAscendingSource(source)) {
    throw new ConfigurationError(
      'This source cannot hand out IDs ascending in row order (only in-process and leased sources can). Nothing was issued. Use fallback: true, or sort the rows by ID before the INSERT.',
    )
  }
  if (fallback === false) {
    throw new ShardOverloadedError(
      `The ${shards.length} IDs could not be handed out ascending in row order within the source's window (from maxLagMs behind the clock to maxDriftMs ahead of it): the source made IDs for these shards too recently. Nothing was issued. Retry later, sort the rows by shard, or use fallback: true.`,
    )
  }
  return perShard()
}
