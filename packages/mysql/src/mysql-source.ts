import {
  ClockMovedBackwardsError,
  ConfigurationError,
  checkCount,
  type IdRequestContext,
  type IdSource,
  InvalidArgumentError,
  type Layout,
  LayoutMismatchError,
  PrefetchBuffers,
  type PrefetchOptions,
  resolveLogicalShards,
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
import { checkGeneratingLayout, layoutKey, MAX_BATCH } from './sql'

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
   * Serve single IDs and batches from a per-shard buffer (the core `PrefetchBuffers`, as in
   * `@shardflake/postgres`): a call the buffer cannot serve takes what is left and reserves `size`
   * in one round trip, or `n + size` when the `n` IDs it still lacks are more than `size` (at most
   * 1,000,000 per reserve), so single-row inserts and small batches cost no round trip for the ID.
   * Unused IDs are dropped after `maxAgeMs` or on `close()` (gaps, never repeats); their embedded
   * time is at most `maxAgeMs` old. `size` may be at most 1,000,000.
   * @example `{ size: 1000 }` serves 1000 single inserts, or ten batches of 100, per round trip.
   * @default undefined (no buffer: every call is one round trip)
   */
  prefetch?: PrefetchOptions
  /**
   * Reserve through the caller's connection (`context.query`, e.g. the ORM's transaction) when
   * one is given, instead of this source's pool; a function decides per shard. Only correct when
   * that connection reaches the server holding the shard, so off unless you say so. Such calls
   * skip the prefetch buffer: they reserve exactly what they return, on that connection.
   *
   * The reserve then runs inside the caller's transaction, which is only safe with a
   * **non-transactional counter** (Aria, the MariaDB default, or MyISAM): its lock ends with the
   * statement and a rollback keeps the counter where it is. With a transactional counter (InnoDB,
   * `mysql8`'s default, or `counterEngine: 'InnoDB'`) a rollback would give the IDs back to the
   * counter and they would be issued again, while an ORM keeps the rolled-back ID on its entity
   * (a retry then writes another row's ID), and the counter row would stay locked until the caller
   * commits. So on the first such call for each shard the source reads the counter's engine
   * (`information_schema`, on the caller's connection, with the layout check) and refuses a
   * transactional one with `ConfigurationError` before anything is reserved there: install the shard with a
   * non-transactional `counterEngine` (or `ALTER TABLE shard_<n>.sf_counter ENGINE=Aria
   * TRANSACTIONAL=0`), or leave this option off for that shard.
   * @example `useContextQuery: (shard) => shard < 1000` (the shards on the ORM's own server)
   * @default false
   */
  useContextQuery?: boolean | ((shard: number) => boolean)
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
 * On the first use of each shard database the source compares its layout with the one the
 * installer recorded there (`sf_meta.layout_key`, read alongside the first reserve, no extra
 * wait) and throws `LayoutMismatchError` when they differ: composed with another layout, the
 * counter's values would give IDs with wrong (even negative) times and shards, unlike the ones
 * `next_id()` makes in SQL, which they could meet.
 *
 * A shard moved to another server (`moveMysqlShards`) is refused by its old server; the source
 * then throws `ConfigurationError` saying so: point the shard map at the new home.
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
  private readonly sequences: bigint[]
  private readonly buffers: PrefetchBuffers | undefined
  private readonly useContext: (shard: number) => boolean
  private readonly statements = new Map<number, string>()
  private readonly key: string
  /** What the first use of each shard database found (layout checked). */
  private readonly checked = new Map<number, ShardCheck>()
  /** Checks in flight, shared by concurrent first calls. */
  private readonly checking = new Map<number, Promise<ShardCheck>>()
  private closed = false

  /**
   * @throws ConfigurationError when neither `shardMap` nor `pool` is given, or a pool would
   * return BIGINT as numbers.
   */
  constructor(options: MysqlSourceOptions) {
    const { layout } = options
    checkGeneratingLayout(layout)
    this.layout = layout
    this.key = layoutKey(layout)
    if (options.shardMap) {
      this.shardMap = options.shardMap
    } else if (options.pool) {
      this.shardMap = mapFromSelection(layout, options.pool, options.shards ?? 'all')
    } else {
      throw new ConfigurationError('MysqlSource needs a shardMap, or a pool (and its shards).')
    }
    for (const pool of this.shardMap.targets()) checkBigNumberConfig(pool, 'MysqlSource')
    this.schemaPrefix = checkSchemaPrefix(options.schemaPrefix ?? 'shard_', layout.shardCount - 1)
    this.logicalShards = resolveLogicalShards(layout, options.logicalShards)
    this.maxWaitMs = options.maxWaitMs ?? 1000
    this.endPools = options.endPools ?? false
    this.timeShift = layout.shifts.time
    this.sequenceBits = BigInt(layout.sequenceBits)
    this.mask = (1n << this.sequenceBits) - 1n
    this.sequences = Array.from({ length: layout.maxSequence + 1 }, (_, i) => BigInt(i))
    if (options.prefetch) {
      const { size } = options.prefetch
      if (size > MAX_BATCH) {
        throw new ConfigurationError(`prefetch.size must be at most ${MAX_BATCH}, got ${size}.`)
      }
      // A refill asks for `missing + size`; one reserve_ids call takes at most MAX_BATCH, and
      // the buffer takes what it lacks from a shorter fill and asks again for the rest.
      this.buffers = new PrefetchBuffers(async (shard, wanted) => {
        const count = Math.min(wanted, MAX_BATCH)
        return this.compose(shard, await this.reserve(shard, count), count)
      }, options.prefetch)
    }
    const use = options.useContextQuery ?? false
    this.useContext = typeof use === 'function' ? use : () => use
  }

  /** One new ID of a logical shard (from the prefetch buffer when there is one). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    const [id] = await this.nextIds(shard, 1, context)
    return id!
  }

  /**
   * `count` new ascending IDs of a logical shard (at most 1,000,000): from the prefetch buffer
   * when there is one, else in one round trip (`reserve_ids(count)`), on the caller's connection
   * when `useContextQuery` says so.
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    if (count > MAX_BATCH) {
      throw new InvalidArgumentError(`count must be at most ${MAX_BATCH}, got ${count}.`)
    }
    this.poolFor(shard)
    if (this.closed) throw new ConfigurationError('This MysqlSource is closed.')
    const query = context?.query && this.useContext(shard) ? context.query : undefined
    if (this.buffers && !query) return this.buffers.take(shard, count)
    return this.compose(shard, await this.reserve(shard, count, query), count)
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
    this.buffers?.clear()
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

  private statement(shard: number): string {
    let sql = this.statements.get(shard)
    if (!sql) {
      sql = `SELECT CAST(\`${this.schemaPrefix}${shard}\`.\`reserve_ids\`(?) AS CHAR) AS v`
      this.statements.set(shard, sql)
    }
    return sql
  }

  /**
   * Reserves `count` counter values (on `query`, the caller's connection, when given; else on
   * the shard's pool) and returns the first. The first use of a shard database also checks its
   * layout: alongside the reserve on the pool, before it on the caller's connection (which also
   * needs a non-transactional counter).
   */
  private async reserve(
    shard: number,
    count: number,
    query?: IdRequestContext['query'],
  ): Promise<bigint> {
    if (this.closed) throw new ConfigurationError('This MysqlSource is closed.')
    const known = this.checked.get(shard)
    if (query) {
      // Checked on the caller's connection too: the server the reserve runs on, and no second
      // connection (a pool held by open transactions cannot starve the call).
      const found = known ?? (await this.check(shard, query))
      if (found.transactional) {
        // Read again next time: the table may have been altered meanwhile.
        this.checked.delete(shard)
        throw new ConfigurationError(
          `Logical shard ${shard} keeps its counter in a transactional table (${this.schemaPrefix}${shard}.sf_counter, engine ${found.engine ?? 'unknown'}), and useContextQuery reserves inside the caller's transaction: a rollback would give the IDs back to the counter and they would be issued again (an ORM keeps the rolled-back ID on its entity), and the counter would stay locked until the caller commits. Nothing was reserved. Use a non-transactional counter (counterEngine 'Aria', the MariaDB default, or 'MyISAM'; or ALTER TABLE ${this.schemaPrefix}${shard}.sf_counter ENGINE=Aria TRANSACTIONAL=0), or turn useContextQuery off for this shard.`,
        )
      }
      return await this.reserveOn(shard, count, query)
    }
    if (known) return await this.reserveOn(shard, count)
    const [check, reserved] = await Promise.allSettled([
      this.check(shard),
      this.reserveOn(shard, count),
    ])
    // A layout mismatch explains whatever the reserve did; its values are dropped (a gap).
    if (check.status === 'rejected') throw check.reason
    if (reserved.status === 'rejected') throw reserved.reason
    return reserved.value
  }

  /**
   * Once per shard database (again after a failure): the recorded layout, the counter's engine;
   * read on `query` when given, else on the shard's pool.
   */
  private check(shard: number, query?: IdRequestContext['query']): Promise<ShardCheck> {
    let pending = this.checking.get(shard)
    if (!pending) {
      pending = this.readShard(shard, query).then(
        (found) => {
          this.checking.delete(shard)
          this.checked.set(shard, found)
          return found
        },
        (error: unknown) => {
          this.checking.delete(shard)
          throw error
        },
      )
      this.checking.set(shard, pending)
    }
    return pending
  }

  private async readShard(shard: number, query?: IdRequestContext['query']): Promise<ShardCheck> {
    const database = `${this.schemaPrefix}${shard}`
    const counter = `FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sf_counter'`
    const sql = `SELECT (SELECT \`value\` FROM \`${database}\`.\`sf_meta\` WHERE \`name\` = 'layout_key') AS layout_key, (SELECT \`value\` FROM \`${database}\`.\`sf_meta\` WHERE \`name\` = 'layout') AS layout, (SELECT ENGINE ${counter}) AS engine, (SELECT TRANSACTIONS FROM information_schema.ENGINES WHERE ENGINE = (SELECT ENGINE ${counter})) AS transactions`
    let rows: unknown
    try {
      rows = query
        ? await query(sql, [database, database])
        : (await this.shardMap.targetFor(shard).query(sql, [database, database]))[0]
    } catch (error) {
      throw this.translate(error, shard)
    }
    const row = (rows as Record<string, unknown>[])[0] ?? {}
    const installed = row.layout_key
    if (typeof installed !== 'string') {
      throw new ConfigurationError(
        `Logical shard ${shard} records no layout (${database}.sf_meta has no layout_key): it was not installed by installMysqlShards, or its metadata was removed. Run installMysqlShards there with the layout its IDs were made with.`,
      )
    }
    if (installed !== this.key) {
      throw new LayoutMismatchError(
        `This MysqlSource was made for layout ${describeLayoutKey(this.key, this.layout.name)}, but logical shard ${shard} (database ${database}) was installed with layout ${describeLayoutKey(installed, layoutName(row.layout))}: composed with this source's layout, its counter would give IDs with wrong (even negative) times and shards that could meet the IDs next_id() makes in SQL. Nothing was handed out. Give the source the installed layout.`,
      )
    }
    const engine = typeof row.engine === 'string' ? row.engine : undefined
    return { engine, transactional: row.transactions !== 'NO' }
  }

  /** One `reserve_ids(count)`; waits while the counter is ahead of the clock. */
  private async reserveOn(
    shard: number,
    count: number,
    query?: IdRequestContext['query'],
  ): Promise<bigint> {
    const sql = this.statement(shard)
    let waited = 0
    for (;;) {
      try {
        const rows = query
          ? await query(sql, [count])
          : (await this.shardMap.targetFor(shard).query(sql, [count]))[0]
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

/** What the first use of a shard database found there. */
interface ShardCheck {
  /** The counter table's engine, when information_schema knows it. */
  engine: string | undefined
  /** True unless the engine is known to be non-transactional (`ENGINES.TRANSACTIONS = 'NO'`). */
  transactional: boolean
}

/** A `layout_key` (see `layoutKey`) in words, for error messages. */
function describeLayoutKey(key: string, name: string | undefined): string {
  const fields = new Map(
    key.split(';').map((part) => {
      const at = part.indexOf('=')
      return [part.slice(0, at), part.slice(at + 1)] as const
    }),
  )
  const epoch = Number(fields.get('epoch'))
  const when = Number.isFinite(epoch) ? new Date(epoch).toISOString() : fields.get('epoch')
  return `${name === undefined ? '' : `${JSON.stringify(name)} `}(epoch ${when}, time/shard/worker/sequence ${fields.get('bits')} bits, ${fields.get('unit')} ms unit, order ${fields.get('order')})`
}

/** The `name` of the layout JSON in `sf_meta`, when there is one. */
function layoutName(json: unknown): string | undefined {
  if (typeof json !== 'string') return undefined
  try {
    const name = (JSON.parse(json) as { name?: unknown }).name
    return typeof name === 'string' ? name : undefined
  } catch {
    return undefined
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
