import {
  ConfigurationError,
  checkCount,
  type IdRequestContext,
  type IdSource,
} from '@shardflake/core'

/** IDs fetched ahead per shard, so that small flushes on a database source skip the round trip. */
export interface ReserveOptions {
  /** IDs fetched beyond what a flush needs, per shard, when its reserve runs short. */
  size: number
  /**
   * The oldest a reserved ID may be when used, in ms; older ones are dropped (gaps, never repeats).
   * @default 1000
   */
  maxAgeMs?: number
}

interface Reserve {
  ids: bigint[]
  next: number
  fetchedAt: number
  pending: Promise<void> | undefined
}

/**
 * An async source seen through per-shard reserves: `nextIds(shard, n)` is served from IDs fetched
 * earlier (`n + size` at a time) while they are fresh. IDs stay distinct and ascending per shard;
 * unused ones are lost on exit. The trade-off: an ID's embedded time is when it was fetched, up
 * to `maxAgeMs` before its row is written.
 */
export class ReservedSource implements IdSource {
  readonly synchronous = false
  private readonly size: number
  private readonly maxAgeMs: number
  private readonly reserves = new Map<number, Reserve>()

  constructor(
    readonly inner: IdSource,
    options: ReserveOptions,
  ) {
    const { size, maxAgeMs = 1000 } = options
    if (!Number.isSafeInteger(size) || size < 1 || !(maxAgeMs >= 0)) {
      throw new ConfigurationError(
        `reserve.size must be a positive integer and reserve.maxAgeMs >= 0, got ${size} and ${maxAgeMs}.`,
      )
    }
    this.size = size
    this.maxAgeMs = maxAgeMs
  }

  get layout() {
    return this.inner.layout
  }

  get logicalShards() {
    return this.inner.logicalShards
  }

  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return (await this.nextIds(shard, 1, context))[0]!
  }

  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    let reserve = this.reserves.get(shard)
    if (!reserve) {
      reserve = { ids: [], next: 0, fetchedAt: 0, pending: undefined }
      this.reserves.set(shard, reserve)
    }
    for (;;) {
      const fresh = Date.now() - reserve.fetchedAt <= this.maxAgeMs
      if (fresh && reserve.ids.length - reserve.next >= count) {
        reserve.next += count
        return reserve.ids.slice(reserve.next - count, reserve.next)
      }
      if (!reserve.pending) {
        const target = reserve
        target.pending = Promise.resolve(
          this.inner.nextIds(shard, count + this.size, context),
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
      await reserve.pending
    }
  }

  close(): void {
    this.reserves.clear()
  }
}
