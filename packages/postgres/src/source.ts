import {
  ConfigurationError,
  checkCount,
  checkKnownOptions,
  checkServedShard,
  contextQueryRule,
  type DatabaseSourceOptions,
  describeValue,
  type IdInput,
  type IdRequestContext,
  type IdSource,
  PrefetchBuffers,
  RunningCalls,
  readSourceDuration,
  requireSharding,
  type Sharding,
  ShardingMismatchError,
  type ShardMap,
  SourceUnavailableError,
  toShardMap,
  withDeadline,
} from '@shardflake/core'
import { checkClient, type SqlClient } from './client'
import { type Call, Connections, type PostgresDatabase, type Rows } from './connections'
import { translatePostgresError } from './errors'
import { checkInstalled, readShardingFrom } from './installer'
import { checkIdentifier, quoteIdentifier, shardSchemaName } from './names'
import { MIN_SQL_VERSION } from './sql/options'

/**
 * What {@link PostgresSource} takes. A database is a `pg.Pool`, a `pg.Client`, a PGlite instance
 * (anything with `query(sql, params)`), or a connection URL: the source then opens a `pg.Pool`
 * for it and {@link PostgresSource.close} ends it.
 */
export interface PostgresSourceOptions extends DatabaseSourceOptions<PostgresDatabase> {
  /**
   * The schema holding the metadata the installer wrote (`installPostgres({ schema })`). On its
   * first use of each database the source reads the sharding recorded there and refuses to hand
   * out IDs under another one (`ShardingMismatchError`).
   * @default 'shardflake'
   */
  schema?: string
}

const SOURCE_OPTIONS = [
  'sharding',
  'databases',
  'shards',
  'schemaPrefix',
  'schema',
  'timeoutMs',
  'prefetch',
  'useContextQuery',
]

/**
 * IDs from the `next_id()`/`next_ids(n)` functions installed by {@link installPostgres}: each
 * logical shard's IDs come from the database that holds the shard, a batch in one round trip.
 * Concurrency-safe: uniqueness is the database's (the sequence), not this object's. Every failure
 * is a `ShardflakeError` (see the package README's errors table).
 *
 * Every call is bounded by `timeoutMs` and the caller's `context.signal`. {@link close} is
 * bounded too: it ends the calls still running at once (`CancelledError`) and returns within
 * `timeoutMs` even when a server stopped answering, for a SIGTERM handler that waits on it.
 *
 * @example One server
 * ```ts
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new PostgresSource({ sharding, databases: pool })
 * const ids = await source.nextIds(sharding.shardForKey(31341n), 100)
 * ```
 * @example Logical shards on two servers, and routing rows
 * ```ts
 * const map = new ShardMap(sharding, [
 *   { from: 0, to: 999, target: poolA },
 *   { from: 1000, to: 1999, target: poolB },
 * ])
 * const source = new PostgresSource({ sharding, databases: map })
 * const id = await source.nextId(1341)
 * await source.poolForId(id).query('INSERT INTO shard_1341.posts (id) VALUES ($1)', [id])
 * ```
 */
export class PostgresSource implements IdSource {
  readonly sharding: Sharding
  readonly synchronous = false
  /** Logical shards to databases. */
  readonly shardMap: ShardMap<PostgresDatabase>
  /** The longest one call waits for its database, in ms. */
  readonly timeoutMs: number
  private readonly schemaPrefix: string
  private readonly schema: string
  private readonly verified = new Map<SqlClient, Promise<void>>()
  private readonly connections: Connections
  private readonly buffers: PrefetchBuffers | undefined
  private readonly useContext: (shard: number) => boolean
  private readonly calls = new RunningCalls('PostgresSource')
  private closing: Promise<void> | undefined

  /**
   * @throws ConfigurationError without a sharding (the message names `logicalShards`).
   * @throws InvalidLayoutError for a decode-only layout; TimeExhaustedError for a used-up one.
   * @throws ShardingMismatchError for a shard map of another sharding.
   * @throws InvalidArgumentError for an unknown option (naming the closest known one), a
   *   `timeoutMs` out of bounds or a bad prefetch size.
   */
  constructor(options: PostgresSourceOptions) {
    // A missing sharding first: its message names logicalShards (a layout alone is not enough).
    const sharding = requireSharding(options?.sharding, 'PostgresSource')
    checkKnownOptions('PostgresSource options', options, SOURCE_OPTIONS)
    sharding.layout.checkGenerating()
    this.sharding = sharding
    this.shardMap = toShardMap(sharding, options.databases, options.shards)
    for (const target of this.shardMap.targets()) {
      if (typeof target !== 'string') checkClient('PostgresSource (databases)', target)
    }
    this.schemaPrefix = checkIdentifier('schema prefix', options.schemaPrefix ?? 'shard_')
    this.schema = checkIdentifier('schema', options.schema ?? 'shardflake')
    shardSchemaName(sharding.logicalShards - 1, this.schemaPrefix)
    this.timeoutMs = readSourceDuration('timeoutMs', options.timeoutMs, {
      min: 1,
    })
    this.connections = new Connections(this.timeoutMs)
    if (options.prefetch !== undefined) {
      this.buffers = new PrefetchBuffers(
        (shard, count) =>
          this.calls.run(this.what(shard, count), undefined, (signal) =>
            this.fetch(shard, count, undefined, signal),
          ),
        options.prefetch,
      )
    }
    this.useContext = contextQueryRule(options.useContextQuery)
  }

  /** The database holding a logical shard (for a URL, a client on the pool the source opened). */
  poolFor(shard: number): SqlClient {
    checkServedShard(this.shardMap, shard)
    const target = this.shardMap.targetFor(shard)
    return typeof target === 'string' ? this.connections.client(target) : target
  }

  /** The database holding the row with this ID (its shard read from the ID). */
  poolForId(id: IdInput): SqlClient {
    return this.poolFor(this.sharding.shardOfId(id))
  }

  /** One new ID for a logical shard (from the prefetch buffer when there is one). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return (await this.nextIds(shard, 1, context))[0]!
  }

  /**
   * `count` new, ascending IDs for a logical shard: from the prefetch buffer when there is one,
   * else in one round trip (`next_ids(count)`).
   * @throws InvalidArgumentError for a count that is not an integer from 1 to 1,000,000 (before any query).
   * @throws ShardOutOfRangeError for a shard outside the logical shards or the shard map.
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    checkServedShard(this.shardMap, shard)
    const what = this.what(shard, count)
    // A call on the caller's connection takes exactly what it returns; buffers use the pools.
    const query = context?.query && this.useContext(shard) ? context.query : undefined
    const buffers = this.buffers
    if (buffers && !query) {
      // A buffer hit needs no waiting, so nothing to bound or to end on close: served at once.
      this.calls.check(what, context?.signal)
      const ready = buffers.takeReady(shard, count)
      if (ready) return ready
    }
    return await this.calls.run(what, context?.signal, (signal) =>
      buffers && !query
        ? withDeadline(() => buffers.take(shard, count, signal), {
            timeoutMs: this.timeoutMs,
            signal,
            what,
          })
        : this.fetch(shard, count, query, signal),
    )
  }

  /**
   * Ends the calls still running at once (`CancelledError`, nothing issued to them), drops the
   * prefetch buffers and ends the pools the source opened from URLs: within `timeoutMs`, after
   * which the connections of a pool that has not ended (a server that stopped answering) are
   * destroyed. The connections that running calls held on pools you passed in are given back
   * broken; those pools stay open: you end them. Safe to call twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.calls.close()
      this.buffers?.clear()
      await this.connections.close()
    })()
    return this.closing
  }

  private what(shard: number, count: number): string {
    return `next_ids(${count}) of logical shard ${shard}`
  }

  private statement(shard: number): string {
    const schema = quoteIdentifier('schema', shardSchemaName(shard, this.schemaPrefix))
    // One row whatever n is: cheaper to parse than n rows; ids as text, never through number.
    // ARRAY(... ORDER BY) then array_to_string: 0.36-0.47 ms server-side for 1000 IDs, where
    // string_agg(... ORDER BY) took 0.65-0.75 ms (an ordered aggregate sorts per group).
    return `SELECT nullif(array_to_string(ARRAY(SELECT t.x FROM ${schema}.next_ids($1::integer) WITH ORDINALITY AS t(x, o) ORDER BY t.o), ','), '') AS ids`
  }

  private async fetch(
    shard: number,
    count: number,
    query?: IdRequestContext['query'],
    signal?: AbortSignal,
  ): Promise<bigint[]> {
    const what = this.what(shard, count)
    const sql = this.statement(shard)
    const target = this.shardMap.targetFor(shard)
    const call: Call = {}
    const rows: unknown = await withDeadline(
      async () => {
        const database = await this.connections.open(target, what)
        await this.verify(database)
        return query
          ? await this.guard(() => query(sql, [count]), shard, what)
          : await this.connections.run(database, sql, [count], call, (error, extra) =>
              this.failure(error, shard, what, extra),
            )
      },
      {
        timeoutMs: this.timeoutMs,
        signal,
        what,
        // Stop the statement on the server too, so a lock or a wait does not outlive the call.
        // (On close the connection is given back broken instead: see Connections.close.)
        onGiveUp: () => (this.calls.closed ? undefined : this.connections.cancel(call)),
      },
    )
    return readIds(rows, count, what)
  }

  private async guard(work: () => Promise<Rows>, shard: number | undefined, what: string) {
    try {
      return await work()
    } catch (error) {
      throw this.failure(error, shard, what)
    }
  }

  private failure(
    error: unknown,
    shard: number | undefined,
    what: string,
    extra: { connecting?: boolean; connectionEnded?: boolean } = {},
  ) {
    return translatePostgresError(error, {
      what,
      ...(shard === undefined ? {} : { shard }),
      layout: this.sharding.layout,
      schemaPrefix: this.schemaPrefix,
      logicalShards: this.sharding.logicalShards,
      ...extra,
    })
  }

  /** Once per database, in one query: the sharding recorded there must be this source's. */
  private verify(database: SqlClient): Promise<void> {
    let check = this.verified.get(database)
    if (!check) {
      // Shared by every caller that arrives meanwhile: not cancelled when one of them gives up.
      const call: Call = {}
      const read = async (text: string, params?: unknown[]) => [
        ...(await this.connections.run(database, text, params ?? [], call, (error, extra) =>
          this.failure(error, undefined, 'reading the recorded sharding', extra),
        )),
      ]
      check = readShardingFrom(read, this.schema).then(async (installed) => {
        if (!installed) {
          throw new ConfigurationError(
            `No shardflake installation is recorded in schema ${JSON.stringify(this.schema)} of this database: run installPostgres(client, { sharding, shards }) there (or pass the schema it used as option schema).`,
          )
        }
        if (installed.logicalShards === null) {
          throw new ShardingMismatchError(
            `The ${installed.database} records no logicalShards: run installPostgres there again with this sharding (${this.sharding}) to record it.`,
          )
        }
        checkInstalled(this.sharding, installed)
        const [outdated] = await read(outdatedShardsSql(this.schema))
        if (typeof outdated?.shards === 'string') {
          throw new ConfigurationError(
            `The ${installed.database} holds next_id() of an older version for logical shards ${outdated.shards} (shard (version)); this package needs version ${MIN_SQL_VERSION} or later: run installPostgres there again (it replaces the functions and keeps every sequence where it is). Version 7 and earlier can hand out an ID twice when a move of a shard's sequence (a catch-up to the clock, or next_ids(n) reserving a range) is cut short by a cancel or a statement_timeout.`,
          )
        }
      })
      // A failed read (a connection error) is tried again on the next call; a mismatch too.
      check.catch(() => this.verified.delete(database))
      this.verified.set(database, check)
    }
    return check
  }
}

/**
 * The shards of an installation whose SQL is older than {@link MIN_SQL_VERSION} (not counting
 * shards moved away), as `shard (version), ...` in column `shards`, NULL when there are none.
 */
function outdatedShardsSql(schema: string): string {
  return `SELECT string_agg(shard::text || ' (' || version || ')', ', ' ORDER BY shard) AS shards
    FROM ${quoteIdentifier('schema', schema)}.shards AS s
    WHERE to_jsonb(s) ->> 'retired_at' IS NULL
      AND NOT (version ~ '^[0-9]{1,9}$' AND version::integer >= ${MIN_SQL_VERSION})`
}

/**
 * The IDs of a `next_ids` row: `count` decimal integers, comma-separated. Anything else (a
 * caller's `context.query` that returned no rows, `null`, or other values) is refused.
 * @throws SourceUnavailableError
 */
function readIds(rows: unknown, count: number, what: string): bigint[] {
  const text = Array.isArray(rows) ? (rows[0] as { ids?: unknown } | undefined)?.ids : undefined
  let ids: bigint[] | undefined
  if (typeof text === 'string' && text !== '') {
    try {
      ids = text.split(',').map((id) => BigInt(id))
    } catch {}
  }
  if (!ids) {
    throw new SourceUnavailableError(
      `${what} returned ${Array.isArray(rows) ? `no IDs (${describeValue(text)})` : describeValue(rows)} instead of a row with its IDs: is context.query running the statement it is given, on the shard's database? Nothing was issued.`,
    )
  }
  if (ids.length !== count) {
    throw new SourceUnavailableError(`${what} returned ${ids.length} IDs. Nothing was issued.`)
  }
  return ids
}
