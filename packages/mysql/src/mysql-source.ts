import {
  ClockMovedBackwardsError,
  ConfigurationError,
  checkCount,
  type IdSource,
  InvalidArgumentError,
  type Layout,
  type ShardMap,
  ShardMap as ShardMapClass,
  ShardOutOfRangeError,
  type ShardSelection,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { asDriverError, isConnectionError, routineSignal, translateRoutineError } from './errors'
import { checkSchemaPrefix } from './identifiers'
import { checkBigNumberConfig } from './pool'
import { checkGeneratingLayout, MAX_BATCH } from './sql'

/** What {@link MysqlSource} takes. */
export interface MysqlSourceOptions {
  /** The layout the routines were installed with. */
  layout: Layout
  /**
   * Where each logical shard lives: logical shard ranges to mysql2 pools (one per physical server).
   * Give either this or `pool` + `shards`.
   */
  shardMap?: ShardMap<Pool>
  /** One server for all the `shards`. */
  pool?: Pool
  /** The logical shards `pool` serves (with `pool`). @default 'all' */
  shards?: ShardSelection
  /**
   * The prefix the shards were installed with.
   * @default 'shard_'
   */
  schemaPrefix?: string
  /** How many logical shards keys are reduced by. @default layout.shardCount */
  logicalShards?: number
  /**
   * How long a call may wait, in total, when a shard's counter is too far ahead of the server
   * clock (a burst, or a clock that stepped back) before it throws `ClockMovedBackwardsError`.
   * @default 1000
   */
  maxWaitMs?: number
  /** End the pools in `close()`. @default false */
  endPools?: boolean
  /**
   * Reserve `size` IDs per round trip and hand them out from memory (per shard): single-row
   * inserts then cost no round trip for the ID. Unused IDs are dropped after `maxAgeMs` or on
   * `close()` (gaps, never repeats); their embedded time is at most `maxAgeMs` old.
   * @default undefined (no buffer: every call is one round trip)
   */
  prefetch?: PrefetchOptions
}

/** Prefetch buffer settings (the same as `@shardflake/postgres`). */
export interface PrefetchOptions {
  /** IDs reserved per round trip when the buffer of a shard is empty. */
  size: number
  /**
   * The oldest a buffered ID may be when handed out, in ms; older ones are dropped.
   * @default 1000
   */
  maxAgeMs?: number
}

interface Buffer {
  /** Next unused counter value. */
  next: bigint
  /** One past the last reserved value. */
  end: bigint
  fetchedAt: number
  pending: Promise<void> | undefined
}

/**
 * IDs from the shard databases' `reserve_ids(n)` routine: one round trip per batch (a single
 * `UPDATE` reserves `n` counter values; the IDs are assembled here from the values and the
 * layout), logical shards routed to physical servers with a core `ShardMap`.
 *
 * The counter counts in "ID space" (`time << sequenceBits | sequence`) and only moves forward, so
 * no value is ever handed out twice: not under concurrency, not past 1024 IDs per ms (it borrows
 * the next milliseconds), not when the server clock steps back (the time part pauses). IDs never
 * pass through a JavaScript `number`: the value is read as a string and pools must have
 * `supportBigNumbers` + `bigNumberStrings` (see `createMysqlPool`).
 *
 * @example
 * ```ts
 * import { instagram, ShardMap } from '@shardflake/core'
 * import { createMysqlPool, MysqlSource } from '@shardflake/mysql'
 *
 * const a = await createMysqlPool('mysql://app@db-a:3306/app')
 * const b = await createMysqlPool('mysql://app@db-b:3306/app')
 * const source = new MysqlSource({
 *   layout: instagram,
 *   shardMap: new ShardMap(instagram, [
 *     { from: 0, to: 999, target: a },
 *     { from: 1000, to: 1999, target: b },
 *   ]),
 * })
 * const ids = await source.nextIds(1341, 500)
 * ```
 */
export class MysqlSource implements IdSource {
  readonly layout: Layout
  readonly synchronous = false
  readonly logicalShards: number
  readonly shardMap: ShardMap<Pool>
  private readonly schemaPrefix: string
  private readonly maxWaitMs: number
  private readonly endPools: boolean
  private readonly timeShift: bigint
  private readonly sequenceBits: bigint
  private readonly mask: bigint
  private readonly prefetch: Required<PrefetchOptions> | undefined
  private readonly sequences: bigint[]
  private readonly buffers = new Map<number, Buffer>()
  private closed = false

  /**
   * @throws ConfigurationError when neither `shardMap` nor `pool` is given, or a pool would
   * return BIGINT as numbers.
   */
  constructor(options: MysqlSourceOptions) {
    const { layout } = options
    checkGeneratingLayout(layout)
    this.layout = layout
    if (options.shardMap) {
      this.shardMap = options.shardMap
    } else if (options.pool) {
      this.shardMap = mapFromSelection(layout, options.pool, options.shards ?? 'all')
    } else {
      throw new ConfigurationError('MysqlSource needs a shardMap, or a pool (and its shards).')
    }
    for (const pool of this.shardMap.targets()) checkBigNumberConfig(pool, 'MysqlSource')
    this.schemaPrefix = checkSchemaPrefix(options.schemaPrefix ?? 'shard_', layout.shardCount - 1)
    this.logicalShards = options.logicalShards ?? layout.shardCount
    this.maxWaitMs = options.maxWaitMs ?? 1000
    this.endPools = options.endPools ?? false
    this.timeShift = layout.shifts.time
    this.sequenceBits = BigInt(layout.sequenceBits)
    this.mask = (1n << this.sequenceBits) - 1n
    this.sequences = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i))
    if (options.prefetch) {
      const { size, maxAgeMs = 1000 } = options.prefetch
      if (!Number.isSafeInteger(size) || size < 1 || size > MAX_BATCH || !(maxAgeMs >= 0)) {
        throw new ConfigurationError(
          `prefetch.size must be an integer from 1 to ${MAX_BATCH} and maxAgeMs >= 0, got ${size} and ${maxAgeMs}.`,
        )
      }
      this.prefetch = { size, maxAgeMs }
    }
  }

  /** One new ID of a logical shard (from the prefetch buffer when there is one). */
  async nextId(shard: number): Promise<bigint> {
    const [id] = await this.nextIds(shard, 1)
    return id!
  }

  /**
   * `count` new ascending IDs of a logical shard, in one round trip (at most 1,000,000), or none
   * when the prefetch buffer holds enough.
   */
  async nextIds(shard: number, count: number): Promise<bigint[]> {
    checkCount(count)
    if (count > MAX_BATCH) {
      throw new InvalidArgumentError(`count must be at most ${MAX_BATCH}, got ${count}.`)
    }
    const pool = this.poolFor(shard)
    if (this.closed) throw new ConfigurationError('This MysqlSource is closed.')
    if (this.prefetch && count <= this.prefetch.size) {
      return this.fromBuffer(pool, shard, count)
    }
    // A batch larger than the buffer: buffered values are older, drop them to stay ascending.
    const buffer = this.buffers.get(shard)
    if (buffer) buffer.next = buffer.end
    return this.compose(shard, await this.reserve(pool, shard, count), count)
  }

  private async fromBuffer(pool: Pool, shard: number, count: number): Promise<bigint[]> {
    const { size, maxAgeMs } = this.prefetch!
    for (;;) {
      let buffer = this.buffers.get(shard)
      if (!buffer) {
        buffer = { next: 0n, end: 0n, fetchedAt: 0, pending: undefined }
        this.buffers.set(shard, buffer)
      }
      const fresh = Date.now() - buffer.fetchedAt <= maxAgeMs
      if (fresh && buffer.end - buffer.next >= BigInt(count)) {
        const first = buffer.next
        buffer.next += BigInt(count)
        return this.compose(shard, first, count)
      }
      if (!buffer.pending) {
        const target = buffer
        target.next = target.end
        target.pending = this.reserve(pool, shard, size).then(
          (first) => {
            target.next = first
            target.end = first + BigInt(size)
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

  /** The IDs of counter values `first .. first + count - 1`: one bigint addition per ID. */
  private compose(shard: number, first: bigint, count: number): bigint[] {
    const shardPart = BigInt(shard) << this.layout.shifts.shard
    const ids = new Array<bigint>(count)
    const perTick = this.sequences.length
    let v = first
    let i = 0
    while (i < count) {
      let base = ((v >> this.sequenceBits) << this.timeShift) | shardPart
      if (base >= 1n << 63n) base -= 1n << 64n
      let sequence = Number(v & this.mask)
      const take = Math.min(count - i, perTick - sequence)
      for (const end = i + take; i < end; i++) ids[i] = base + this.sequences[sequence++]!
      v += BigInt(take)
    }
    return ids
  }

  /** Drops the prefetch buffers; ends the pools when `endPools` was set. */
  async close(): Promise<void> {
    this.closed = true
    this.buffers.clear()
    if (this.endPools) await Promise.all(this.shardMap.targets().map((pool) => pool.end()))
  }

  private translate(error: unknown, shard: number): unknown {
    const code = asDriverError(error)?.code
    if (
      code === 'ER_BAD_DB_ERROR' ||
      code === 'ER_SP_DOES_NOT_EXIST' ||
      code === 'ER_NO_SUCH_TABLE'
    ) {
      return new ConfigurationError(
        `Logical shard ${shard} is not installed on the server the shard map gives for it (database ${this.schemaPrefix}${shard}): run installMysqlShards there. (${asDriverError(error)?.message ?? code})`,
      )
    }
    if (isConnectionError(error)) {
      return new SourceUnavailableError(
        `The server of logical shard ${shard} is unavailable (${code ?? 'connection lost'}).`,
        { cause: error },
      )
    }
    return translateRoutineError(error, shard, this.maxWaitMs)
  }

  private poolFor(shard: number): Pool {
    this.layout.checkShard(shard)
    if (!this.shardMap.has(shard)) {
      throw new ShardOutOfRangeError(
        shard,
        `Logical shard ${shard} is not served by this MysqlSource (not in its shard map).`,
      )
    }
    return this.shardMap.targetFor(shard)
  }

  /** Reserves `count` counter values; waits while the counter is ahead of the clock. */
  private async reserve(pool: Pool, shard: number, count: number): Promise<bigint> {
    const sql = `SELECT CAST(\`${this.schemaPrefix}${shard}\`.\`reserve_ids\`(?) AS CHAR) AS v`
    let waited = 0
    for (;;) {
      try {
        const [rows] = await pool.query(sql, [count])
        const value = (rows as { v?: unknown }[])[0]?.v
        if (typeof value !== 'string' || !/^\d+$/.test(value)) {
          throw new ConfigurationError(
            `reserve_ids of shard ${shard} returned ${String(value)}; is the shard installed?`,
          )
        }
        return BigInt(value)
      } catch (error) {
        const signal = routineSignal(error)
        if (signal?.kind === 'CLOCK') {
          const [aheadMs = 0, allowedMs = 0] = signal.rest.split(':').map(Number)
          const waitMs = Math.max(1, aheadMs - allowedMs)
          if (waited + waitMs <= this.maxWaitMs) {
            await new Promise((resolve) => setTimeout(resolve, waitMs))
            waited += waitMs
            continue
          }
          throw new ClockMovedBackwardsError(aheadMs, this.maxWaitMs)
        }
        throw this.translate(error, shard)
      }
    }
  }
}

function mapFromSelection(layout: Layout, pool: Pool, selection: ShardSelection): ShardMap<Pool> {
  if (selection === 'all') return ShardMapClass.single(layout, pool)
  if (Array.isArray(selection)) {
    const sorted = [...new Set(selection as readonly number[])].sort((a, b) => a - b)
    if (sorted.length === 0) throw new ConfigurationError('shards must not be an empty list.')
    const ranges: { from: number; to: number; target: Pool }[] = []
    for (const shard of sorted) {
      const last = ranges[ranges.length - 1]
      if (last && last.to === shard - 1) last.to = shard
      else ranges.push({ from: shard, to: shard, target: pool })
    }
    return new ShardMapClass(layout, ranges)
  }
  const { from, to } = selection as { from: number; to: number }
  return new ShardMapClass(layout, [{ from, to, target: pool }])
}
