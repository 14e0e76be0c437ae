import {
  ConfigurationError,
  type CreatedDirectory,
  checkDirectoryEntries,
  checkExpectedVersion,
  checkIdentifier,
  checkKnownOptions,
  type DirectoryEntry,
  type DirectorySnapshot,
  describeValue,
  directoryChanged,
  InvalidArgumentError,
  readMaxStaleMs,
  readSourceDuration,
  requireSharding,
  type ShardDirectory,
  type ShardflakeError,
  type Sharding,
  ShardMap,
  toDirectorySnapshot,
  withDeadline,
} from '@shardflake/core'
import type { SqlClient } from './client'
import { type Call, Connections, type Rows } from './connections'
import { translatePostgresError } from './errors'

/**
 * What {@link PostgresShardDirectory} takes besides the client.
 * @example
 * ```ts
 * import type { Sharding } from '@shardflake/core'
 * import type { PostgresShardDirectoryOptions } from '@shardflake/postgres'
 * declare const sharding: Sharding
 *
 * const options: PostgresShardDirectoryOptions = { sharding, table: 'shard_homes', maxStaleMs: 5000, timeoutMs: 2000 }
 * ```
 */
export interface PostgresShardDirectoryOptions {
  /** The application's sharding: recorded by `create()`, compared on every read. */
  readonly sharding: Sharding
  /** The schema of the directory's table (created by `create()` when missing). @default 'public' */
  readonly schema?: string
  /** The directory's table. @default 'shardflake_directory' */
  readonly table?: string
  /**
   * The longest any process may route with what it read, in ms: recorded by `create()`, the same
   * for every process. Given here, a directory created with another value is refused (a process
   * configured otherwise); left out, the recorded one is used.
   * @default 5000 (when creating)
   */
  readonly maxStaleMs?: number
  /**
   * The longest one call waits for the server, in ms. Past it the call fails with
   * `TimedOutError` and its statement is cancelled on the server.
   * @default 2000
   */
  readonly timeoutMs?: number
}

const OPTIONS = ['sharding', 'schema', 'table', 'maxStaleMs', 'timeoutMs']
/** Errors of a table or schema that does not exist. */
const MISSING = new Set(['42P01', '3F000'])
/** Errors of two sessions creating the same table at once (the loser retries). */
const CREATE_RACE = new Set(['23505', '42P07'])

/**
 * The shard directory in a PostgreSQL table, `shardflake_directory`, in a database you pick (one
 * of the application's servers, or another): one row with the homes of every logical shard, a
 * version that grows with every change, the `maxStaleMs` every process honours and the sharding.
 * Changes are compare-and-set on the version, in one statement. Every call has a deadline
 * (`timeoutMs`) after which its statement is cancelled on the server.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { PostgresShardDirectory } from '@shardflake/postgres'
 * import pg from 'pg'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const a = new pg.Pool({ connectionString: process.env.SERVER_A_URL })
 * const b = new pg.Pool({ connectionString: process.env.SERVER_B_URL })
 * const directory = new PostgresShardDirectory(a, { sharding })
 * await directory.create(
 *   new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * ) // once, at setup; later calls keep what is there
 * const homes = await ShardHomes.open({ sharding, servers: { a, b }, directory })
 * ```
 */
export class PostgresShardDirectory implements ShardDirectory {
  private readonly sharding: Sharding
  private readonly schema: string
  private readonly table: string
  /** `"schema"."table"`, for statements and messages. */
  private readonly name: string
  private readonly maxStaleMs: number | undefined
  private readonly timeoutMs: number
  private readonly connections: Connections
  private closed = false

  /**
   * @throws InvalidArgumentError for a client that cannot run queries, or options that are not valid.
   * @throws InvalidIdentifierError for a schema or table name that is not a plain identifier.
   * @throws ConfigurationError without a sharding.
   */
  constructor(
    private readonly client: SqlClient,
    options: PostgresShardDirectoryOptions,
  ) {
    if (typeof (client as Partial<SqlClient> | null)?.query !== 'function') {
      throw new InvalidArgumentError(
        `PostgresShardDirectory needs a pg.Pool, a pg.Client or a PGlite, got ${describeValue(client)}.`,
      )
    }
    checkKnownOptions('PostgresShardDirectory options', options, OPTIONS)
    this.sharding = requireSharding(options.sharding, 'PostgresShardDirectory')
    this.schema = checkIdentifier('schema', options.schema ?? 'public')
    this.table = checkIdentifier('table', options.table ?? 'shardflake_directory')
    this.name = `"${this.schema}"."${this.table}"`
    this.maxStaleMs =
      options.maxStaleMs === undefined ? undefined : readMaxStaleMs(options.maxStaleMs)
    this.timeoutMs = readSourceDuration('timeoutMs', options.timeoutMs, { min: 1 })
    this.connections = new Connections(this.timeoutMs)
  }

  /**
   * Creates the table and records the homes of `map` (every shard `serving`), the sharding and
   * `maxStaleMs`. Idempotent: a directory that exists keeps its entries, and is only checked.
   * @throws ShardingMismatchError when `map` or the existing directory has another sharding.
   * @throws ConfigurationError when it exists with another `maxStaleMs` than the options give.
   * @example
   * ```ts
   * import { ShardMap, type Sharding } from '@shardflake/core'
   * import type { PostgresShardDirectory } from '@shardflake/postgres'
   * declare const directory: PostgresShardDirectory
   * declare const sharding: Sharding
   *
   * const { created } = await directory.create(ShardMap.single(sharding, 'a'))
   * ```
   */
  async create(map: ShardMap<string>, signal?: AbortSignal): Promise<CreatedDirectory> {
    if (!(map instanceof ShardMap)) {
      throw new InvalidArgumentError(
        `create() takes a ShardMap of server names (the first homes), got ${describeValue(map)}.`,
      )
    }
    this.sharding.checkSame(map.sharding, 'The shard map given to create()')
    const entries = checkDirectoryEntries(
      this.sharding,
      map.ranges.map(({ from, to, target }) => ({ from, to, server: target, state: 'serving' })),
    )
    const attempt = () =>
      this.call('create', signal, async (run) => {
        if (this.schema !== 'public') await run(`CREATE SCHEMA IF NOT EXISTS "${this.schema}"`)
        await run(
          `CREATE TABLE IF NOT EXISTS ${this.name} (
             only_row boolean PRIMARY KEY DEFAULT true CHECK (only_row),
             version bigint NOT NULL CHECK (version > 0),
             max_stale_ms integer NOT NULL CHECK (max_stale_ms > 0),
             sharding jsonb NOT NULL,
             entries jsonb NOT NULL,
             changed_at timestamptz NOT NULL DEFAULT clock_timestamp())`,
        )
        const inserted = await run(
          `INSERT INTO ${this.name} (version, max_stale_ms, sharding, entries)
           VALUES (1, $1, $2::jsonb, $3::jsonb)
           ON CONFLICT (only_row) DO NOTHING RETURNING version`,
          [
            this.maxStaleMs ?? readMaxStaleMs(undefined),
            JSON.stringify(this.sharding.toJSON()),
            JSON.stringify(entries),
          ],
        )
        if (inserted.length > 0) {
          await run(
            `COMMENT ON TABLE ${this.name} IS 'shardflake shard directory: the server holding each logical shard (entries), for every process of the application. Changed only by compare-and-set on version; every process reads it again at least every max_stale_ms. Do not edit by hand while the application runs.'`,
          )
        }
        return { created: inserted.length > 0, snapshot: this.snapshotOf(await this.select(run)) }
      })
    try {
      return await attempt()
    } catch (error) {
      // Two processes creating the table at once: the loser finds it made, and checks it.
      const code = ((error as ShardflakeError).cause as { code?: unknown } | undefined)?.code
      if (typeof code === 'string' && CREATE_RACE.has(code)) return await attempt()
      throw error
    }
  }

  /**
   * @throws ConfigurationError when the directory was never created, is malformed, or records
   * another `maxStaleMs` than the options give.
   * @throws ShardingMismatchError when it records another sharding.
   * @throws TimedOutError, CancelledError, ConnectionRefusedError, ... when the server fails.
   * @example
   * ```ts
   * import type { PostgresShardDirectory } from '@shardflake/postgres'
   * declare const directory: PostgresShardDirectory
   *
   * const { version, entries } = await directory.read(AbortSignal.timeout(1000))
   * ```
   */
  async read(signal?: AbortSignal): Promise<DirectorySnapshot> {
    return this.call('read', signal, async (run) => this.snapshotOf(await this.select(run)))
  }

  /**
   * @throws DirectoryChangedError when the stored version is not `expected`; nothing is written.
   * @throws InvalidArgumentError, ShardOutOfRangeError for entries that cannot be a shard map.
   * @throws as {@link read} otherwise.
   * @example
   * ```ts
   * import type { PostgresShardDirectory } from '@shardflake/postgres'
   * declare const directory: PostgresShardDirectory
   *
   * const current = await directory.read()
   * await directory.compareAndSet(
   *   current.version,
   *   current.entries.map((entry) => (entry.from === 16 ? { ...entry, state: 'switching' as const } : entry)),
   * )
   * ```
   */
  async compareAndSet(
    expected: bigint,
    entries: readonly DirectoryEntry[],
    signal?: AbortSignal,
  ): Promise<DirectorySnapshot> {
    checkExpectedVersion(expected)
    const checked = checkDirectoryEntries(this.sharding, entries)
    return this.call('compareAndSet', signal, async (run) => {
      const current = this.snapshotOf(await this.select(run))
      if (current.version !== expected) throw directoryChanged(this.name, expected, current.version)
      const updated = await run(
        `UPDATE ${this.name}
            SET version = version + 1, entries = $2::jsonb, changed_at = clock_timestamp()
          WHERE only_row AND version = $1
         RETURNING version::text AS version`,
        [expected.toString(), JSON.stringify(checked)],
      )
      const version = updated[0]?.version
      if (typeof version !== 'string') {
        const now = await run(`SELECT version::text AS version FROM ${this.name}`)
        const found = now[0]?.version
        throw directoryChanged(
          this.name,
          expected,
          typeof found === 'string' ? BigInt(found) : undefined,
        )
      }
      return Object.freeze({
        ...current,
        version: BigInt(version),
        entries: Object.freeze(checked),
      })
    })
  }

  /**
   * Refuses further calls. The client stays open: end it yourself.
   * @example
   * ```ts
   * import type { PostgresShardDirectory } from '@shardflake/postgres'
   * declare const directory: PostgresShardDirectory
   *
   * await directory.close()
   * ```
   */
  async close(): Promise<void> {
    this.closed = true
    await this.connections.close()
  }

  private async select(
    run: (sql: string, params?: unknown[]) => Promise<Rows>,
  ): Promise<Record<string, unknown>> {
    const rows = await run(
      `SELECT version::text AS version, max_stale_ms, sharding, entries FROM ${this.name} WHERE only_row`,
    )
    const row = rows[0]
    if (!row) throw this.missing()
    return row
  }

  private snapshotOf(row: Record<string, unknown>): DirectorySnapshot {
    const snapshot = toDirectorySnapshot(this.sharding, `table ${this.name}`, {
      version: row.version,
      maxStaleMs: row.max_stale_ms,
      sharding: row.sharding,
      entries: row.entries,
    })
    if (this.maxStaleMs !== undefined && snapshot.maxStaleMs !== this.maxStaleMs) {
      throw new ConfigurationError(
        `The shard directory in table ${this.name} was created with maxStaleMs ${snapshot.maxStaleMs}, but this process is configured with ${this.maxStaleMs}: every process must honour the same one. Leave maxStaleMs out to use the recorded value.`,
      )
    }
    return snapshot
  }

  /** Runs `work` within the deadline, each statement on its own connection of a pool. */
  private call<T>(
    action: string,
    signal: AbortSignal | undefined,
    work: (run: (sql: string, params?: unknown[]) => Promise<Rows>) => Promise<T>,
  ): Promise<T> {
    if (this.closed) {
      return Promise.reject(new ConfigurationError(`The shard directory ${this.name} is closed.`))
    }
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      return Promise.reject(
        new InvalidArgumentError(`signal must be an AbortSignal, got ${describeValue(signal)}.`),
      )
    }
    const what = `${action} of the shard directory in table ${this.name}`
    const call: Call = {}
    return withDeadline(
      () =>
        work((sql, params = []) =>
          this.connections.run(this.client, sql, params, call, (error, extra) =>
            this.translate(error, what, extra),
          ),
        ),
      {
        timeoutMs: this.timeoutMs,
        signal,
        what,
        onGiveUp: () => this.connections.cancel(call),
      },
    )
  }

  private translate(
    error: unknown,
    what: string,
    extra?: { connecting?: boolean; connectionEnded?: boolean },
  ): ShardflakeError {
    const code = (error as { code?: unknown } | null)?.code
    if (typeof code === 'string' && MISSING.has(code)) return this.missing(error)
    return translatePostgresError(error, { what, ...extra })
  }

  private missing(cause?: unknown): ConfigurationError {
    return new ConfigurationError(
      `There is no shard directory in table ${this.name} of this database: create it once with directory.create(shardMap) (or point schema and table at the one the application uses).`,
      cause === undefined ? undefined : { cause },
    )
  }
}
