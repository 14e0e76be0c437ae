import { RunningCalls } from './database-source'
import { CancelledError, InvalidArgumentError, SourceUnavailableError } from './errors'
import { checkCount, type IdRequestContext, type IdSource, MAX_IDS_PER_CALL } from './id-source'
import { checkKnownOptions, describeValue } from './known-options'
import type { Sharding } from './sharding'
import { readDuration, readInteger } from './source-options'

/**
 * IDs fetched ahead, per logical shard, so that single inserts and small flushes on a database
 * source need no round trip of their own.
 *
 * The trade-off: an ID's embedded time is when the source **made** it, up to `maxAgeMs` before
 * its row is written, so rows from different processes interleave by up to that much, and rows of
 * different shards reach a B-tree primary key out of ID order (it fills less compactly: the larger
 * the buffers and `maxAgeMs`, the more); IDs left in a buffer when the process exits are never used
 * (gaps, never repeats).
 */
export interface PrefetchOptions {
  /**
   * How many IDs one round trip fetches ahead for a shard: an integer from 1 to 1,000,000
   * (`MAX_IDS_PER_CALL`). A request for `n` IDs that the buffer cannot serve fetches `n + size`
   * when `n` is larger than `size` (at most 1,000,000), and `size` otherwise. Batches of up to
   * `size` rows are served from the buffer without waiting (see `refillAhead`), so make it at
   * least your largest usual batch. A size beyond what the source makes in one call (its layout's
   * IDs per ms times its `maxDriftMs`) makes those fetches fail with `ShardOverloadedError`.
   *
   * @example `{ size: 100 }` serves 100 single inserts, or ten flushes of 10 rows, per round trip.
   */
  readonly size: number
  /**
   * The oldest a buffered ID may be when handed out, in ms (0 to one day). Older ones are dropped
   * (gaps, never repeats), which bounds how far an ID's time lags behind its row.
   * @default 1000
   */
  readonly maxAgeMs?: number
  /**
   * Fetch the next `size` IDs of a shard in the background as soon as a call leaves fewer than
   * half of `size` in its buffer, or fewer than it took itself, so that a steady stream of
   * inserts (single rows, or batches of up to `size`) never waits for a round trip: the way
   * segment allocators double-buffer. Costs
   * nothing more per ID; a shard that then goes quiet leaves up to `size` more IDs unused (gaps,
   * never repeats). A background fetch that fails is reported to the calls waiting for it, and
   * the next call fetches again. `false`: fetch only when a call finds the buffer short.
   * @default true
   */
  readonly refillAhead?: boolean
}

const PREFETCH_OPTIONS = ['size', 'maxAgeMs', 'refillAhead']

/** IDs of one fetch, handed out from `next` on. */
interface Segment {
  readonly ids: readonly bigint[]
  next: number
  readonly fetchedAt: number
}

/** One shard's fetched IDs, oldest first (each fetch starts after the one before it ended). */
interface Buffer {
  segments: Segment[]
  pending: Promise<void> | undefined
}

/**
 * The per-shard buffers behind {@link PrefetchSource}, for sources that offer a `prefetch` option
 * of their own (`PostgresSource`, `MysqlSource`): give it the function that fetches `count` IDs of
 * a shard in one round trip. Concurrent callers share one fetch per shard; a shard never has two
 * fetches running, so every fetch's IDs follow the ones fetched before.
 *
 * A buffer serves every caller, so `fetch` must use the source's own connections, never a
 * caller's (`IdRequestContext.query`): IDs reserved inside a caller's transaction could be given
 * back by its rollback (an InnoDB counter) while other callers still hold them. A fetch may run
 * with no caller waiting (`refillAhead`), so the source must end it on close.
 */
export class PrefetchBuffers {
  readonly size: number
  readonly maxAgeMs: number
  readonly refillAhead: boolean
  private readonly buffers = new Map<number, Buffer>()

  /**
   * @param where Names the options in messages: `'prefetch'` (a source's option), or
   *   `'PrefetchSource options'`.
   * @throws InvalidArgumentError for options that are not an object, an unknown option, a size
   *   that is not an integer from 1 to 1,000,000, an age that is not from 0 to one day, or a
   *   `refillAhead` that is not a boolean.
   */
  constructor(
    private readonly fetch: (shard: number, count: number) => Promise<readonly bigint[]>,
    options: PrefetchOptions,
    where = 'prefetch',
  ) {
    checkKnownOptions(where, options, PREFETCH_OPTIONS)
    const { size, maxAgeMs, refillAhead } = options
    if (size === undefined) {
      throw new InvalidArgumentError(
        `${where} needs size: how many IDs one round trip fetches ahead, an integer from 1 to ${MAX_IDS_PER_CALL} (100 is a good start).`,
      )
    }
    this.size = readInteger(`${where}.size`, size, 0, { min: 1, max: MAX_IDS_PER_CALL })
    this.maxAgeMs = readDuration(`${where}.maxAgeMs`, maxAgeMs, 1000)
    if (refillAhead !== undefined && typeof refillAhead !== 'boolean') {
      throw new InvalidArgumentError(
        `${where}.refillAhead must be true or false, got ${describeValue(refillAhead)}.`,
      )
    }
    this.refillAhead = refillAhead ?? true
  }

  /**
   * `count` IDs of a shard, ascending, when the buffer holds that many fresh ones; else
   * `undefined`, and nothing is taken. No waiting: the path of a buffer hit.
   * @throws InvalidArgumentError for a count that is not an integer from 1 to 1,000,000.
   */
  takeReady(shard: number, count: number): bigint[] | undefined {
    checkCount(count)
    const buffer = this.buffers.get(shard)
    if (!buffer || this.fresh(buffer) < count) return undefined
    const out: bigint[] = []
    this.takeFrom(buffer, count, out)
    this.refillIfLow(shard, buffer, count)
    return out
  }

  /**
   * `count` IDs of a shard, ascending: what the buffer holds first, then one fetch for the rest
   * (plus {@link PrefetchOptions.size} more for the next callers, at most 1,000,000 in all).
   * @throws InvalidArgumentError for a count that is not an integer from 1 to 1,000,000.
   * @throws CancelledError when `signal` aborts while the call waits for a fetch (the IDs it had
   *   taken are dropped: gaps, never repeats); the fetch goes on for the other callers.
   */
  async take(shard: number, count: number, signal?: AbortSignal): Promise<bigint[]> {
    checkCount(count)
    let buffer = this.buffers.get(shard)
    if (!buffer) {
      buffer = { segments: [], pending: undefined }
      this.buffers.set(shard, buffer)
    }
    const out: bigint[] = []
    for (;;) {
      this.fresh(buffer)
      this.takeFrom(buffer, count - out.length, out)
      if (out.length === count) {
        this.refillIfLow(shard, buffer, count)
        return out
      }
      if (signal?.aborted) throw cancelled(shard, signal)
      let pending = buffer.pending
      if (!pending) {
        const missing = count - out.length
        const wanted = Math.min(
          missing > this.size ? missing + this.size : this.size,
          MAX_IDS_PER_CALL,
        )
        pending = this.startFetch(shard, buffer, wanted)
      }
      await (signal ? untilAborted(pending, shard, signal) : pending)
    }
  }

  /** Drops every buffered ID. */
  clear(): void {
    this.buffers.clear()
  }

  /** Drops used-up and stale segments; returns how many fresh IDs are left. */
  private fresh(buffer: Buffer): number {
    // Taken from the front, fetched in order: what is used up or stale is at the front.
    const oldest = Date.now() - this.maxAgeMs
    const { segments } = buffer
    while (
      segments.length > 0 &&
      (segments[0]!.next === segments[0]!.ids.length || segments[0]!.fetchedAt < oldest)
    ) {
      segments.shift()
    }
    let left = 0
    for (const segment of segments) left += segment.ids.length - segment.next
    return left
  }

  /** Moves up to `count` IDs, oldest first, from the buffer to `out`. */
  private takeFrom(buffer: Buffer, count: number, out: bigint[]): void {
    let wanted = count
    for (const segment of buffer.segments) {
      const n = Math.min(wanted, segment.ids.length - segment.next)
      for (let i = 0; i < n; i++) out.push(segment.ids[segment.next++]!)
      wanted -= n
      if (wanted === 0) return
    }
  }

  /**
   * With `refillAhead`, fetches `size` more in the background when fewer than half of them are
   * left, or fewer than the call just served took (up to `size`): the same call again is served.
   */
  private refillIfLow(shard: number, buffer: Buffer, count: number): void {
    if (!this.refillAhead || buffer.pending) return
    const left = this.fresh(buffer)
    if (left * 2 >= this.size && left >= Math.min(count, this.size)) return
    // Nobody waits for it yet: a failure reaches the callers that come to wait, no one else.
    this.startFetch(shard, buffer, this.size).catch(() => {})
  }

  private startFetch(shard: number, buffer: Buffer, wanted: number): Promise<void> {
    let fetched: Promise<readonly bigint[]>
    try {
      fetched = this.fetch(shard, wanted)
    } catch (error) {
      fetched = Promise.reject(error)
    }
    const pending = fetched.then(
      (ids) => {
        buffer.pending = undefined
        if (!Array.isArray(ids) || ids.length !== wanted) {
          throw new SourceUnavailableError(
            `The source asked for ${wanted} IDs of logical shard ${shard} returned ${Array.isArray(ids) ? ids.length : describeValue(ids)}. Nothing was issued.`,
          )
        }
        buffer.segments.push({ ids, next: 0, fetchedAt: Date.now() })
      },
      (error: unknown) => {
        buffer.pending = undefined
        throw error
      },
    )
    buffer.pending = pending
    return pending
  }
}

function cancelled(shard: number, signal: AbortSignal): CancelledError {
  return new CancelledError(
    `The call for IDs of logical shard ${shard} was cancelled by the caller. Nothing was issued.`,
    { cause: signal.reason },
  )
}

/** `pending`, or CancelledError as soon as `signal` aborts. */
function untilAborted(pending: Promise<void>, shard: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => reject(cancelled(shard, signal))
    signal.addEventListener('abort', onAbort, { once: true })
    pending.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

/**
 * Any async source seen through per-shard prefetch buffers ({@link PrefetchOptions}): single
 * IDs and small batches come from IDs fetched earlier while they are fresh, so an insert of one
 * row or a flush of ten pays no round trip of its own, and (`refillAhead`) the next IDs are on
 * their way before a buffer runs dry. IDs stay distinct and, per shard, ascending.
 *
 * The buffers are shared by all callers, so the inner source is always asked without the
 * caller's context: a transaction's connection (`context.query`) is never used to fill them. The
 * caller's `context.signal` still ends its own wait (`CancelledError`, no ID).
 *
 * `close()` ends the calls waiting for a fetch at once (`CancelledError`) and returns when the
 * inner source's `close()` does (a database source's is bounded by its `timeoutMs`), which also
 * ends a refill running in the background.
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
  private readonly calls = new RunningCalls('PrefetchSource')
  private closing: Promise<void> | undefined

  /**
   * @throws InvalidArgumentError when `inner` is not a source, or for options that are missing,
   *   unknown, or out of bounds (a size from 1 to 1,000,000, an age from 0 to one day).
   */
  constructor(
    readonly inner: IdSource,
    options: PrefetchOptions,
  ) {
    const candidate = inner as Partial<IdSource> | null | undefined
    if (
      typeof candidate !== 'object' ||
      candidate === null ||
      typeof candidate.nextIds !== 'function' ||
      typeof candidate.close !== 'function'
    ) {
      throw new InvalidArgumentError(
        `PrefetchSource wraps a source (an IdSource such as a PostgresSource or MysqlSource), got ${describeValue(inner)}.`,
      )
    }
    this.sharding = inner.sharding
    this.buffers = new PrefetchBuffers(
      async (shard, count) => await inner.nextIds(shard, count),
      options,
      'PrefetchSource options',
    )
  }

  /** One ID of a shard from its buffer. Only the context's `signal` is used (see above). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return (await this.nextIds(shard, 1, context))[0]!
  }

  /**
   * `count` IDs of a shard from its buffer. Only the context's `signal` is used (see above).
   * @throws InvalidArgumentError for a count that is not an integer from 1 to 1,000,000.
   * @throws ShardOutOfRangeError for a shard outside the inner source's sharding.
   * @throws CancelledError when `context.signal` aborts before or while the call waits, or the
   *   source is closed meanwhile.
   * @throws ConfigurationError after `close()`.
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    this.sharding?.checkShard(shard)
    const what = `nextIds(${count}) of logical shard ${typeof shard === 'number' ? shard : describeValue(shard)}`
    // A buffer hit needs no waiting, so nothing to end on close: served at once.
    this.calls.check(what, context?.signal)
    return (
      this.buffers.takeReady(shard, count) ??
      (await this.calls.run(what, context?.signal, (signal) =>
        this.buffers.take(shard, count, signal),
      ))
    )
  }

  /**
   * Ends the calls waiting for a fetch (`CancelledError`), drops the buffers and closes the inner
   * source; returns when the inner source's `close()` does. Safe to call twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.calls.close()
      this.buffers.clear()
      await this.inner.close()
    })()
    return this.closing
  }
}
