import {
  ClockMovedBackwardsError,
  ConfigurationError,
  checkCount,
  type IdInput,
  type IdRequestContext,
  type IdSource,
  InvalidLayoutError,
  type Layout,
  LayoutMismatchError,
  PrefetchBuffers,
  type PrefetchOptions,
  ShardflakeError,
  ShardMap,
  ShardMovedError,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { SqlClient } from './client'
import { checkIdentifier, quoteIdent } from './identifiers'
import { describeLayout, readInstalledLayout } from './installer'
import { shardSchemaName } from './sql'

/** What {@link PostgresSource} takes. */
export interface PostgresSourceOptions {
  /** The layout installed in the databases (checked by the installer, baked into the SQL). */
  layout: Layout
  /**
   * Where the logical shards live: one database (a `pg.Pool`, a PGlite instance, anything with
   * `query(sql, params)`) serving every shard, or a {@link ShardMap} from logical shard ranges
   * to databases (Instagram's thousands of logical shards on a few servers).
   */
  databases: SqlClient | ShardMap<SqlClient>
  /** @default 'shard_' */
  schemaPrefix?: string
  /**
   * The schema holding the metadata the installer wrote (`installPostgres({ schema })`). On its
   * first use of each database the source reads the layout recorded there and refuses to hand
   * out IDs made under another layout (`LayoutMismatchError`): decoding them with this source's
   * layout would give wrong shards and times.
   * @default 'shardflake'
   */
  schema?: string
  /** How many logical shards keys are reduced by. @default the shard map's highest shard + 1 */
  logicalShards?: number
  /**
   * Serve single IDs and small batches from a per-shard buffer filled `size` beyond the request
   * at a time, so single inserts and small flushes pay no round trip of their own. The trade-off:
   * an ID's embedded time is when it was **made**, up to `maxAgeMs` before the row is inserted,
   * so IDs from different processes interleave by up to that much; unused buffered IDs are lost
   * on exit (gaps, never repeats). See {@link PrefetchOptions}.
   * @default undefined (no buffer: one round trip per call)
   */
  prefetch?: PrefetchOptions
  /**
   * Run the query on the caller's connection (`context.query`, e.g. the ORM's transaction) when
   * one is given. Only correct when that connection is to the database holding the shard, so off
   * unless you say so; a function decides per shard. Such calls skip the prefetch buffer: they
   * draw exactly what they return, on that connection.
   * @default false
   */
  useContextQuery?: boolean | ((shard: number) => boolean)
}

/**
 * IDs from the `next_id()`/`next_ids(n)` functions installed by {@link installPostgres}: each
 * logical shard's IDs come from the database that holds the shard, a batch in one round trip.
 * Concurrency-safe: uniqueness is the database's (the sequence), not this object's.
 *
 * @example One server
 * ```ts
 * const source = new PostgresSource({ layout: instagram, databases: pool })
 * const ids = await source.nextIds(5, 100)
 * ```
 * @example Logical shards on two servers, and routing rows
 * ```ts
 * const map = new ShardMap(instagram, [
 *   { from: 0, to: 999, target: poolA },
 *   { from: 1000, to: 1999, target: poolB },
 * ])
 * const source = new PostgresSource({ layout: instagram, databases: map })
 * const id = await source.nextId(1341)
 * await source.poolForId(id).query('INSERT INTO shard_1341.posts (id) VALUES ($1)', [id])
 * ```
 * @example Embedded (PGlite)
 * ```ts
 * const db = new PGlite()
 * await installPostgres(db, { layout: instagram, shards: '0-3' })
 * const source = new PostgresSource({ layout: instagram, databases: db })
 * ```
 */
export class PostgresSource implements IdSource {
  readonly layout: Layout
  readonly synchronous = false
  readonly logicalShards: number
  /** Logical shards to databases. */
  readonly map: ShardMap<SqlClient>
  private readonly schemaPrefix: string
  private readonly schema: string
  private readonly verified = new Map<SqlClient, Promise<void>>()
  private readonly buffers: PrefetchBuffers | undefined
  private readonly useContext: (shard: number) => boolean
  private readonly statements = new Map<number, string>()
  private closed = false

  /**
   * @throws InvalidLayoutError for a decode-only layout.
   * @throws ConfigurationError for a shard map of another layout or a bad prefetch size.
   */
  constructor(options: PostgresSourceOptions) {
    const { layout } = options
    if (layout.decodeOnly) {
      throw new InvalidLayoutError(
        `Layout ${JSON.stringify(layout.name)} is for decoding other systems' IDs; define your own layout to generate.`,
      )
    }
    this.layout = layout
    this.map =
      options.databases instanceof ShardMap
        ? options.databases
        : ShardMap.single(layout, options.databases)
    if (!this.map.layout.equals(layout)) {
      throw new ConfigurationError('The shard map was made for another layout.')
    }
    this.schemaPrefix = options.schemaPrefix ?? 'shard_'
    this.schema = checkIdentifier('schema', options.schema ?? 'shardflake')
    shardSchemaName(layout.shardCount - 1, this.schemaPrefix)
    const last = this.map.ranges[this.map.ranges.length - 1]
    this.logicalShards = options.logicalShards ?? (last ? last.to + 1 : layout.shardCount)
    if (options.prefetch) {
      this.buffers = new PrefetchBuffers(
        (shard, count) => this.fetch(shard, count),
        options.prefetch,
      )
    }
    const use = options.useContextQuery ?? false
    this.useContext = typeof use === 'function' ? use : () => use
  }

  /** The database holding a logical shard. @throws ShardOutOfRangeError */
  poolFor(shard: number): SqlClient {
    this.checkShard(shard)
    return this.map.targetFor(shard)
  }

  /** The database holding the row with this ID (its shard read from the ID). */
  poolForId(id: IdInput): SqlClient {
    return this.poolFor(this.layout.shardOf(id))
  }

  /** One new ID for a logical shard (from the prefetch buffer when there is one). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return (await this.nextIds(shard, 1, context))[0]!
  }

  /**
   * `count` new, ascending IDs for a logical shard: from the prefetch buffer when there is one,
   * else in one round trip (`next_ids(count)`).
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    this.checkShard(shard)
    // A call on the caller's connection takes exactly what it returns; buffers use the pools.
    const query = context?.query && this.useContext(shard) ? context.query : undefined
    if (this.buffers && !query) return this.buffers.take(shard, count)
    return this.fetch(shard, count, query)
  }

  /** Drops the prefetch buffers. The pools belong to the caller, who ends them. */
  close(): void {
    this.closed = true
    this.buffers?.clear()
  }

  private checkShard(shard: number): void {
    this.layout.checkShard(shard)
    if (!this.map.has(shard)) {
      throw new ShardOutOfRangeError(
        shard,
        `Logical shard ${shard} is not in this source's shard map.`,
      )
    }
  }

  private statement(shard: number): string {
    let sql = this.statements.get(shard)
    if (!sql) {
      const schema = quoteIdent('schema', shardSchemaName(shard, this.schemaPrefix))
      // One row whatever n is: cheaper to parse than n rows; ids as text, never through number.
      // ARRAY(... ORDER BY) then array_to_string: 0.36-0.47 ms server-side for 1000 IDs, where
      // string_agg(... ORDER BY) took 0.65-0.75 ms (an ordered aggregate sorts per group).
      sql = `SELECT nullif(array_to_string(ARRAY(SELECT t.x FROM ${schema}.next_ids($1::integer) WITH ORDINALITY AS t(x, o) ORDER BY t.o), ','), '') AS ids`
      this.statements.set(shard, sql)
    }
    return sql
  }

  private async fetch(
    shard: number,
    count: number,
    query?: IdRequestContext['query'],
  ): Promise<bigint[]> {
    if (this.closed) throw new ConfigurationError('This PostgresSource is closed.')
    const sql = this.statement(shard)
    const database = this.map.targetFor(shard)
    let rows: readonly unknown[]
    try {
      // The first use of a database checks its layout alongside the first fetch (no extra wait).
      const [, result] = await Promise.all([
        this.verify(database),
        query ? query(sql, [count]) : database.query(sql, [count]).then((r) => r.rows),
      ])
      rows = result
    } catch (error) {
      throw this.translate(error, shard)
    }
    const text = (rows[0] as { ids?: unknown } | undefined)?.ids
    if (typeof text !== 'string') {
      throw new SourceUnavailableError(`next_ids(${count}) of shard ${shard} returned no IDs.`)
    }
    const ids = text.split(',').map((id) => BigInt(id))
    if (ids.length !== count) {
      throw new SourceUnavailableError(
        `next_ids(${count}) of shard ${shard} returned ${ids.length} IDs.`,
      )
    }
    return ids
  }

  /** Once per database: the layout recorded there must be this source's. */
  private verify(database: SqlClient): Promise<void> {
    let check = this.verified.get(database)
    if (!check) {
      check = readInstalledLayout(database, { schema: this.schema }).then((installed) => {
        if (!installed) {
          throw new ConfigurationError(
            `No shardflake layout is recorded in schema ${JSON.stringify(this.schema)} of this database: run installPostgres there (or pass the schema it used as option schema).`,
          )
        }
        if (!installed.equals(this.layout)) {
          throw new LayoutMismatchError(
            `This PostgresSource was made for layout ${describeLayout(this.layout)}, but the database holds layout ${describeLayout(installed)}: its IDs would decode to wrong shards and times. Give the source the installed layout.`,
          )
        }
      })
      // A failed read (a connection error) is tried again on the next call; a mismatch too.
      check.catch(() => this.verified.delete(database))
      this.verified.set(database, check)
    }
    return check
  }

  private translate(error: unknown, shard: number): unknown {
    if (error instanceof ShardflakeError) return error
    const code = (error as { code?: unknown } | undefined)?.code
    if (code === 'SF001') {
      // The function waited for the clock as long as it may (see maxWaitMs of the SQL options).
      const text = error instanceof Error ? error.message : ''
      const ahead = /is (\d+) ms ahead/.exec(text)
      const wait = /at most (\d+)\)/.exec(text)
      return new ClockMovedBackwardsError(Number(ahead?.[1] ?? 0), Number(wait?.[1] ?? 0))
    }
    if (code === 'SF005') {
      // The shard was moved away from this database (moveShards): the map is out of date.
      const text = error instanceof Error ? error.message.replace(/^shardflake: /, '') : ''
      return new ShardMovedError(
        shard,
        `${text} (the shard map gives this database for logical shard ${shard}).`,
      )
    }
    if (
      (code === '2200H' || code === '22003') &&
      error instanceof Error &&
      /sequence "id_seq"/.test(error.message)
    ) {
      // A call already running when the shard's fence committed (or the layout's end).
      return new ShardMovedError(
        shard,
        `The sequence of logical shard ${shard} is at its end in the database the shard map gives for it: the shard was moved to another database (update the shard map), or the layout's time ran out. No ID was issued.`,
      )
    }
    if (code === '3F000' || code === '42883' || code === '42P01') {
      return new ConfigurationError(
        `Logical shard ${shard} is not installed in the database the shard map gives for it (schema ${shardSchemaName(shard, this.schemaPrefix)}): run installPostgres there.`,
      )
    }
    if (
      typeof code === 'string' &&
      /^(ECONNREFUSED|ECONNRESET|ENOTFOUND|ETIMEDOUT|57P0[1-3]|08\d\d\d)$/.test(code)
    ) {
      return new SourceUnavailableError(
        `The database of logical shard ${shard} is unavailable (${code}).`,
        { cause: error },
      )
    }
    return error
  }
}
