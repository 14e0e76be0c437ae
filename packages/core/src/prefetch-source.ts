import { ConfigurationError } from './errors'
import { checkCount, type IdRequestContext, type IdSource } from './id-source'
import type { Sharding } from './sharding'

/**
 * IDs fetched ahead, per logical shard, so that single inserts and small flushes on a database
 * source need no round trip of their own.
 *
 * The trade-off: an ID's embedded time is when the source **made** it, up to `maxAgeMs` before
 * its row is written, so rows from different processes interleave by up to that much; IDs left in
 * a buffer when the process exits are never used (gaps, never repeats).
 */
export interface PrefetchOptions {
  /**
   * How many IDs beyond the current request one round trip fetches when a shard's buffer runs
   * short. A request for `n` IDs that the buffer cannot serve fetches `n + size` when `n` is
   * larger than `size`, and `size` otherwise.
   *
   * @example `{ size: 100 }` serves 100 single inserts, or ten flushes of 10 rows, per round trip.
   */
  readonly size: number
  /**
   * The oldest a buffered ID may be when handed out, in ms. Older ones are dropped (gaps, never
   * repeats), which bounds how far an ID's time lags behind its row.
   * @default 1000
   */
  readonly maxAgeMs?: number
}

interface Buffer {
  ids: readonly bigint[]
  next: number
  fetchedAt: number
  pending: Promise<void> | undefined
}

/**
 * The per-shard buffers behind {@link PrefetchSource}, for sources that offer a `prefetch` option
 * of their own (`PostgresSource`, `MysqlSource`): give it the function that fetches `count` IDs of
 * a shard in one round trip. Concurrent callers share one fetch per shard.
 *
 * A buffer serves every caller, so `fetch` must use the source's own connections, never a
 * caller's (`IdRequestContext.query`): IDs reserved inside a caller's transaction could be given
 * back by its rollback (an InnoDB counter) while other callers still hold them.
 */
export class PrefetchBuffers {
  readonly size: number
  readonly maxAgeMs: number
  private readonly buffers = new Map<number, Buffer>()

  /** @throws ConfigurationError for a size that is not a positive integer or a negative age. */
  constructor(
    private readonly fetch: (shard: number, count: number) => Promise<readonly bigint[]>,
    options: PrefetchOptions,
  ) {
    const { size, maxAgeMs = 1000 } = options
    if (!Number.isSafeInteger(size) || size < 1 || !(maxAgeMs >= 0)) {
      throw new ConfigurationError(
        `prefetch.size must be a positive integer and prefetch.maxAgeMs >= 0, got ${String(size)} and ${String(maxAgeMs)}.`,
      )
    }
    this.size = size
    this.maxAgeMs = maxAgeMs
  }

  /**
   * `count` IDs of a shard, ascending: what the buffer holds first, then one fetch for the rest
   * (plus {@link PrefetchOptions.size} more for the next callers).
   */
  async take(shard: number, count: number): Promise<bigint[]> {
    checkCount(count)
    let buffer = this.buffers.get(shard)
    if (!buffer) {
      buffer = { ids: [], next: 0, fetchedAt: 0, pending: undefined }
      this.buffers.set(shard, buffer)
    }
    const out: bigint[] = []
    for (;;) {
      if (Date.now() - buffer.fetchedAt > this.maxAgeMs) buffer.next = buffer.ids.length
      const n = Math.min(count - out.length, buffer.ids.length - buffer.next)
      for (let i = 0; i < n; i++) out.push(buffer.ids[buffer.next++]!)
      if (out.length === count) return out
      if (!buffer.pending) {
        const missing = count - out.length
        const target = buffer
        target.pending = this.fetch(
          shard,
          missing > this.size ? missing + this.size : this.size,
        ).then(
          (ids) => {
            target.ids = ids
            target.next = 0
            target.fetchedAt = Date.now()
            target.pending = undefined
          },
          (error: unknown) => {
            target.pending = undefined
            throw error
          },
        )
      }
      await buffer.pending
    }
  }

  /** Drops every buffered ID. */
  clear(): void {
    this.buffers.clear()
  }
}

/**
 * Any async source seen through per-shard prefetch buffers ({@link PrefetchOptions}): single
 * IDs and small batches come from IDs fetched earlier while they are fresh, so an insert of one
 * row or a flush of ten pays no round trip of its own. IDs stay distinct and, per shard, ascending.
 *
 * The buffers are shared by all callers, so the inner source is always asked without the
 * caller's context: a transaction's connection (`context.query`) is never used to fill them.
 *
 * @example
 * ```ts
 * import { PrefetchSource } from '@shardflake/core'
 *
 * const source = new PrefetchSource(new PostgresSource({ sharding, databases: pool }), {
 *   size: 100,
 * })
 * await source.nextId(5) // one round trip fetches 100 IDs of shard 5
 * await source.nextIds(5, 10) // served from the buffer
 * ```
 */
export class PrefetchSource implements IdSource {
  readonly synchronous = false
  readonly sharding: Sharding | undefined
  private readonly buffers: PrefetchBuffers

  /** @throws ConfigurationError for a bad size or age. */
  constructor(
    readonly inner: IdSource,
    options: PrefetchOptions,
  ) {
    this.sharding = inner.sharding
    this.buffers = new PrefetchBuffers(
      async (shard, count) => await inner.nextIds(shard, count),
      options,
    )
  }

  /** One ID of a shard from its buffer. The context is not passed on (see above). */
  async nextId(shard: number, _context?: IdRequestContext): Promise<bigint> {
    return (await this.buffers.take(shard, 1))[0]!
  }

  /** `count` IDs of a shard from its buffer. The context is not passed on (see above). */
  nextIds(shard: number, count: number, _context?: IdRequestContext): Promise<bigint[]> {
    return this.buffers.take(shard, count)
  }

  /** Drops the buffers and closes the inner source. */
  async close(): Promise<void> {
    this.buffers.clear()
    await this.inner.close()
  }
}
