import {
  ClockMovedBackwardsError,
  ConfigurationError,
  checkCount,
  checkKnownOptions,
  checkServedShard,
  contextQueryRule,
  type DatabaseSourceOptions,
  describeValue,
  type IdRequestContext,
  type IdSource,
  InvalidArgumentError,
  type OpenedPools,
  PrefetchBuffers,
  RunningCalls,
  readSourceDuration,
  requireSharding,
  type Sharding,
  type ShardMap,
  toShardMap,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import type { MysqlTarget } from './databases'
import { driverError, translateError } from './errors'
import { checkSchemaPrefix, shardSchemaName } from './identifiers'
import { checkBigNumberConfig, checkPool, openedPools } from './pool'
import { callServer, type RunQuery } from './server-call'
import { readShardCheck, type ShardCheck } from './shard-check'
import { checkGeneratingLayout } from './sql/options'
import { SIGNALS } from './sql/signals'

/** What {@link MysqlSource} takes (`databases`: pools or `mysql://` URLs). */
export interface MysqlSourceOptions extends DatabaseSourceOptions<MysqlTarget> {
  /**
   * How long a call may wait, in total, while a shard's counter is further ahead of the server
   * clock than the installed `maxDriftMs` (a burst, or a clock that stepped back), before it
   * throws `ShardOverloadedError` or `ClockMovedBackwardsError`.
   * @default 100 (core SOURCE_DEFAULTS.maxWaitMs)
   */
  maxWaitMs?: number
}

const SOURCE_OPTIONS = [
  'sharding',
  'databases',
  'shards',
  'schemaPrefix',
  'timeoutMs',
  'maxWaitMs',
  'prefetch',
  'useContextQuery',
]

/**
 * IDs from the shard databases' `reserve_ids(n)` routine: one round trip per batch (one
 * `UPDATE` reserves `n` counter values; the IDs are assembled here from the values and the
 * layout), logical shards routed to servers with a core `ShardMap`.
 *
 * The counter counts in "ID space" (`time << sequenceBits | sequence`) and only moves forward,
 * so no value is handed out twice: not under concurrency, not past the layout's IDs per time
 * unit (it borrows the next units, up to `maxDriftMs`), not when the server clock steps back.
 *
 * On the first use of each shard database the source compares the sharding recorded there by
 * the installer (layout and logicalShards) with its own: `ShardingMismatchError` when they
 * differ. Every failure is a `ShardflakeError` (see the package README's errors table), every
 * call is bounded by `timeoutMs` and the caller's `context.signal` (a statement given up on is
 * killed on the server, `KILL QUERY`). `prefetch.size` is at most 1,000,000. {@link close} is
 * bounded too: calls still running end at once (`CancelledError`), and it returns within
 * `timeoutMs` even when a server stopped answering.
 *
 * `useContextQuery` is only safe with a non-transactional counter (Aria, the MariaDB default, or
 * MyISAM): the source checks the counter's engine on the first such call and refuses an InnoDB
 * one with `ConfigurationError`, because a rollback would give its IDs back.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { MysqlSource } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new MysqlSource({
 *   sharding,
 *   databases: [
 *     { from: 0, to: 999, target: 'mysql://app@db-a:3306/app' },
 *     { from: 1000, to: 1999, target: 'mysql://app@db-b:3306/app' },
 *   ],
 * })
 * const ids = await source.nextIds(sharding.shardForKey(31341n), 500)
 * await source.close() // ends the two pools it opened
 * ```
 */
export class MysqlSource implements IdSource {
  readonly sharding: Sharding
  readonly synchronous = false
  /** Which server serves which logical shards. */
  readonly shardMap: ShardMap<MysqlTarget>
  private readonly schemaPrefix: string
  private readonly maxWaitMs: number
  private readonly timeoutMs: number
  private readonly timeShift: bigint
  private readonly sequenceBits: bigint
  private readonly mask: bigint
  private readonly sequences: bigint[]
  private readonly buffers: PrefetchBuffers | undefined
  private readonly useContext: (shard: number) => boolean
  /** Pools opened from URLs (ended on close). */
  private readonly opened: OpenedPools<Pool>
  /** What the first use of each shard database found (sharding checked). */
  private readonly checked = new Map<number, ShardCheck>()
  private readonly calls = new RunningCalls('MysqlSource')
  private closing: Promise<void> | undefined

  /**
   * @throws ConfigurationError without a sharding (naming `logicalShards`), or for a pool that
   *   would return BIGINT as numbers.
   * @throws ShardingMismatchError for a `ShardMap` made with another sharding.
   * @throws InvalidLayoutError, TimeExhaustedError for a layout that cannot make IDs now.
   * @throws InvalidArgumentError for an unknown option (naming the closest known one), a
   *   database that is neither a mysql2 pool nor a `mysql://` URL, or a number out of bounds.
   */
  constructor(options: MysqlSourceOptions) {
    // A missing sharding first: its message names logicalShards (a layout alone is not enough).
    const sharding = requireSharding(options?.sharding, 'MysqlSource')
    checkKnownOptions('MysqlSource options', options, SOURCE_OPTIONS)
    const { layout } = sharding
    checkGeneratingLayout(layout)
    this.sharding = sharding
    this.shardMap = toShardMap(sharding, options.databases, options.shards)
    for (const target of this.shardMap.targets()) {
      if (typeof target === 'string') checkUrl(target)
      else {
        checkPool('MysqlSource (databases)', target)
        checkBigNumberConfig(target, 'MysqlSource')
      }
    }
    this.schemaPrefix = checkSchemaPrefix(options.schemaPrefix ?? 'shard_', layout.shardCount - 1)
    this.maxWaitMs = readSourceDuration('maxWaitMs', options.maxWaitMs)
    this.timeoutMs = readSourceDuration('timeoutMs', options.timeoutMs, {
      min: 1,
    })
    this.opened = openedPools(this.timeoutMs)
    this.timeShift = layout.shifts.time
    this.sequenceBits = BigInt(layout.sequenceBits)
    this.mask = (1n << this.sequenceBits) - 1n
    this.sequences = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i))
    if (options.prefetch !== undefined) {
      // A fetch shared by the buffer's callers: ended by close(), not by one caller's signal.
      this.buffers = new PrefetchBuffers(
        (shard, count) =>
          this.calls.run(this.what(shard), undefined, async (signal) =>
            this.compose(shard, await this.reserve(shard, count, undefined, signal), count),
          ),
        options.prefetch,
      )
    }
    this.useContext = contextQueryRule(options.useContextQuery)
  }

  /** One new ID of a logical shard (from the prefetch buffer when there is one). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    const [id] = await this.nextIds(shard, 1, context)
    return id!
  }

  /**
   * `count` new ascending IDs of a logical shard (at most 1,000,000, checked first): from the
   * prefetch buffer when there is one, else in one round trip (`reserve_ids(count)`).
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    checkServedShard(this.shardMap, shard)
    const query = context?.query && this.useContext(shard) ? context.query : undefined
    const buffers = this.buffers
    if (buffers && !query) {
      // A buffer hit needs no waiting, so nothing to end on close: served at once.
      this.calls.check(this.what(shard), context?.signal)
      const ready = buffers.takeReady(shard, count)
      if (ready) return ready
    }
    return await this.calls.run(this.what(shard), context?.signal, async (signal) =>
      buffers && !query
        ? await buffers.take(shard, count, signal)
        : this.compose(shard, await this.reserve(shard, count, query, signal), count),
    )
  }

  /**
   * Ends the calls still running at once (`CancelledError`, nothing issued to them; their
   * connections are closed), drops the prefetch buffers and ends the pools the source opened
   * from URLs: within `timeoutMs`, after which the connections of a pool that has not ended (a
   * server that stopped answering) are destroyed. Pools you passed in stay open. Safe to call
   * twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.calls.close()
      this.buffers?.clear()
      await this.opened.close(this.timeoutMs)
    })()
    return this.closing
  }

  /** The IDs of counter values `first .. first + count - 1`: one bigint addition per ID. */
  private compose(shard: number, first: bigint, count: number): bigint[] {
    const shardPart = BigInt(shard) << this.sharding.layout.shifts.shard
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

  private pool(shard: number): Promise<Pool> {
    const target = this.shardMap.targetFor(shard)
    return typeof target === 'string' ? this.opened.get(target) : Promise.resolve(target)
  }

  private what(shard: number): string {
    return `logical shard ${shard} (database ${shardSchemaName(shard, this.schemaPrefix)})`
  }

  private statement(shard: number): string {
    return `SELECT CAST(\`${shardSchemaName(shard, this.schemaPrefix)}\`.\`reserve_ids\`(?) AS CHAR) AS v`
  }

  /**
   * Reserves `count` counter values within `timeoutMs` and the caller's signal, on `query` (the
   * caller's connection) when given, else on one connection of the shard's pool; returns the
   * first. The first use of a shard database checks its recorded sharding first, on the same
   * connection.
   */
  private async reserve(
    shard: number,
    count: number,
    query?: IdRequestContext['query'],
    signal?: AbortSignal,
  ): Promise<bigint> {
    const what = this.what(shard)
    try {
      const pool = query ? undefined : await this.pool(shard)
      return await callServer(
        {
          pool,
          query,
          timeoutMs: this.timeoutMs,
          signal,
          what,
          // Closing: nobody waits for the server any more, not even for a KILL QUERY.
          giveUp: () => (this.calls.closed ? 'destroy' : 'kill'),
        },
        async (run) => {
          const found = this.checked.get(shard) ?? (await this.check(shard, run))
          if (query && found.transactional) {
            this.checked.delete(shard) // read again next time: the table may be altered
            throw new ConfigurationError(
              `Logical shard ${shard} keeps its counter in a transactional table (${shardSchemaName(shard, this.schemaPrefix)}.sf_counter, engine ${found.engine ?? 'unknown'}), and useContextQuery reserves inside the caller's transaction: a rollback would give the IDs back to the counter and they would be issued again. Nothing was reserved. Use a non-transactional counter (counterEngine 'Aria' or 'MyISAM'), or turn useContextQuery off for this shard.`,
            )
          }
          return await this.reserveOn(shard, count, run)
        },
      )
    } catch (error) {
      throw translateError(error, { what, shard, maxWaitMs: this.maxWaitMs })
    }
  }

  /**
   * Once per shard database (again after a failure): the recorded sharding, the counter's engine.
   * Each caller that finds no result yet reads it on its own connection, within its own deadline:
   * a shared read would fail every waiting caller when the one running it gives up.
   */
  private async check(shard: number, run: RunQuery): Promise<ShardCheck> {
    const found = await readShardCheck(run, this.sharding, shard, this.schemaPrefix)
    this.checked.set(shard, found)
    return found
  }

  /**
   * One `reserve_ids(count)`; while the counter is too far ahead of the clock (SQLSTATE SF001
   * or SF006) waits 1, 2, 4 ... ms, at most `maxWaitMs` in total, and tries again.
   */
  private async reserveOn(shard: number, count: number, run: RunQuery): Promise<bigint> {
    const sql = this.statement(shard)
    let waited = 0
    let step = 1
    for (;;) {
      try {
        const rows = await run(sql, [count])
        const value = rows[0]?.v
        if (typeof value !== 'string' || !/^\d+$/.test(value)) {
          throw new ConfigurationError(
            `reserve_ids of logical shard ${shard} returned ${describeValue(value)}, not a counter value: is the shard installed by this version (installMysql), and does context.query return the rows of the statement it is given? Nothing was issued.`,
          )
        }
        return BigInt(value)
      } catch (error) {
        const state = driverError(error)?.sqlState
        if (state !== SIGNALS.CLOCK_BEHIND && state !== SIGNALS.OVERLOADED) throw error
        if (waited >= this.maxWaitMs) {
          if (state === SIGNALS.CLOCK_BEHIND) {
            throw new ClockMovedBackwardsError(await this.behindMs(shard, run), this.maxWaitMs, {
              cause: error,
            })
          }
          throw error
        }
        const waitMs = Math.min(step, this.maxWaitMs - waited)
        await new Promise((resolve) => setTimeout(resolve, waitMs))
        waited += waitMs
        step *= 2
      }
    }
  }

  /** How far the server clock is behind the latest time it showed the shard's counter, in ms. */
  private async behindMs(shard: number, run: RunQuery): Promise<number> {
    const { layout } = this.sharding
    try {
      const rows = await run(
        `SELECT CAST(\`t\` >> ${layout.sequenceBits} AS CHAR) AS t, CAST(FLOOR((UNIX_TIMESTAMP(SYSDATE(3)) * 1000 - ${layout.epoch}) / ${layout.timeUnitMs}) AS CHAR) AS now FROM \`${shardSchemaName(shard, this.schemaPrefix)}\`.\`sf_counter\` WHERE \`k\` = 1`,
        [],
      )
      const row = rows[0]
      return Math.max(0, (Number(row?.t) - Number(row?.now)) * layout.timeUnitMs)
    } catch {
      return 0
    }
  }
}

/**
 * Throws unless `url` reads as a `mysql://` (or `mariadb://`) URL.
 * @throws InvalidArgumentError
 */
function checkUrl(url: string): void {
  if (!URL.canParse(url) || !/^(mysql|mariadb):$/.test(new URL(url).protocol)) {
    throw new InvalidArgumentError(
      `MysqlSource: a database given as a string must be a mysql:// URL (mysql://user:password@host:3306/), got ${describeValue(url)}.`,
    )
  }
}
