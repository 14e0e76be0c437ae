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
  type Sharding,
  ShardMap,
  toDirectorySnapshot,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { driverError, translateError } from './errors'
import { callServer, type RunQuery } from './server-call'

/**
 * What {@link MysqlShardDirectory} takes besides the pool.
 * @example
 * ```ts
 * import type { Sharding } from '@shardflake/core'
 * import type { MysqlShardDirectoryOptions } from '@shardflake/mysql'
 * declare const sharding: Sharding
 *
 * const options: MysqlShardDirectoryOptions = { sharding, table: 'shard_homes', maxStaleMs: 5000, timeoutMs: 2000 }
 * ```
 */
export interface MysqlShardDirectoryOptions {
  /** The application's sharding: recorded by `create()`, compared on every read. */
  readonly sharding: Sharding
  /**
   * The database of the directory's table (created by `create()` when missing).
   * @default the pool's own database
   */
  readonly database?: string
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
   * `TimedOutError` and its statement is killed on the server (`KILL QUERY`).
   * @default 2000
   */
  readonly timeoutMs?: number
}

const OPTIONS = ['sharding', 'database', 'table', 'maxStaleMs', 'timeoutMs']
/** ER_BAD_DB_ERROR, ER_NO_SUCH_TABLE. */
const MISSING_ERRNOS = new Set([1049, 1146])
/** ER_NO_DB_ERROR: the pool has no database and none was given. */
const NO_DATABASE = 1046

/**
 * The shard directory in a MySQL 8 or MariaDB table, `shardflake_directory`, in a database you
 * pick (on one of the application's servers, or another): one row with the homes of every
 * logical shard, a version that grows with every change, the `maxStaleMs` every process honours
 * and the sharding. Changes are compare-and-set on the version, in one statement. Every call has
 * a deadline (`timeoutMs`) after which its statement is killed on the server.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { createMysqlPool, MysqlShardDirectory } from '@shardflake/mysql'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const a = await createMysqlPool(process.env.SERVER_A_URL!)
 * const b = await createMysqlPool(process.env.SERVER_B_URL!)
 * const directory = new MysqlShardDirectory(a, { sharding })
 * await directory.create(
 *   new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * ) // once, at setup; later calls keep what is there
 * const homes = await ShardHomes.open({ sharding, servers: { a, b }, directory })
 * ```
 */
export class MysqlShardDirectory implements ShardDirectory {
  private readonly sharding: Sharding
  private readonly database: string | undefined
  /** The table, qualified when a database is given, for statements and messages. */
  private readonly name: string
  private readonly maxStaleMs: number | undefined
  private readonly timeoutMs: number
  private closed = false

  /**
   * @throws InvalidArgumentError for something that is not a mysql2 promise pool, or options
   * that are not valid.
   * @throws InvalidIdentifierError for a database or table name that is not a plain identifier.
   * @throws ConfigurationError without a sharding.
   */
  constructor(
    private readonly pool: Pool,
    options: MysqlShardDirectoryOptions,
  ) {
    if (typeof (pool as Partial<Pool> | null)?.pool?.getConnection !== 'function') {
      throw new InvalidArgumentError(
        `MysqlShardDirectory needs a mysql2/promise pool (createMysqlPool, or mysql.createPool from 'mysql2/promise'), got ${describeValue(pool)}.`,
      )
    }
    checkKnownOptions('MysqlShardDirectory options', options, OPTIONS)
    this.sharding = requireSharding(options.sharding, 'MysqlShardDirectory')
    this.database =
      options.database === undefined ? undefined : checkIdentifier('database', options.database)
    const table = checkIdentifier('table', options.table ?? 'shardflake_directory')
    this.name = this.database ? `\`${this.database}\`.\`${table}\`` : `\`${table}\``
    this.maxStaleMs =
      options.maxStaleMs === undefined ? undefined : readMaxStaleMs(options.maxStaleMs)
    this.timeoutMs = readSourceDuration('timeoutMs', options.timeoutMs, { min: 1 })
  }

  /**
   * Creates the table and records the homes of `map` (every shard `serving`), the sharding and
   * `maxStaleMs`. Idempotent: a directory that exists keeps its entries, and is only checked.
   * @throws ShardingMismatchError when `map` or the existing directory has another sharding.
   * @throws ConfigurationError when it exists with another `maxStaleMs` than the options give.
   * @example
   * ```ts
   * import { ShardMap, type Sharding } from '@shardflake/core'
   * import type { MysqlShardDirectory } from '@shardflake/mysql'
   * declare const directory: MysqlShardDirectory
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
    return this.call('create', signal, async (run) => {
      if (this.database) {
        await run(`CREATE DATABASE IF NOT EXISTS \`${this.database}\` CHARACTER SET utf8mb4`, [])
      }
      await run(
        `CREATE TABLE IF NOT EXISTS ${this.name} (
           only_row TINYINT NOT NULL DEFAULT 1 PRIMARY KEY CHECK (only_row = 1),
           version BIGINT NOT NULL CHECK (version > 0),
           max_stale_ms INT NOT NULL CHECK (max_stale_ms > 0),
           sharding LONGTEXT NOT NULL,
           entries LONGTEXT NOT NULL,
           changed_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
         ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4
         COMMENT = 'shardflake shard directory: the server holding each logical shard (entries, JSON), for every process of the application. Changed only by compare-and-set on version; every process reads it again at least every max_stale_ms.'`,
        [],
      )
      await run(
        `INSERT IGNORE INTO ${this.name} (only_row, version, max_stale_ms, sharding, entries)
         VALUES (1, 1, ?, ?, ?)`,
        [
          this.maxStaleMs ?? readMaxStaleMs(undefined),
          JSON.stringify(this.sharding.toJSON()),
          JSON.stringify(entries),
        ],
      )
      const [count] = await run('SELECT ROW_COUNT() AS inserted', [])
      const created = Number(count?.inserted) === 1
      return { created, snapshot: this.snapshotOf(await this.select(run)) }
    })
  }

  /**
   * @throws ConfigurationError when the directory was never created, is malformed, or records
   * another `maxStaleMs` than the options give.
   * @throws ShardingMismatchError when it records another sharding.
   * @throws TimedOutError, CancelledError, ConnectionRefusedError, ... when the server fails.
   * @example
   * ```ts
   * import type { MysqlShardDirectory } from '@shardflake/mysql'
   * declare const directory: MysqlShardDirectory
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
   * import type { MysqlShardDirectory } from '@shardflake/mysql'
   * declare const directory: MysqlShardDirectory
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
      await run(
        `UPDATE ${this.name}
            SET version = version + 1, entries = ?, changed_at = CURRENT_TIMESTAMP(3)
          WHERE only_row = 1 AND version = ?`,
        [JSON.stringify(checked), expected.toString()],
      )
      const [count] = await run('SELECT ROW_COUNT() AS changed', [])
      if (Number(count?.changed) !== 1) {
        const [now] = await run(`SELECT CAST(version AS CHAR) AS version FROM ${this.name}`, [])
        const found = now?.version
        throw directoryChanged(
          this.name,
          expected,
          typeof found === 'string' ? BigInt(found) : undefined,
        )
      }
      return Object.freeze({
        ...current,
        version: expected + 1n,
        entries: Object.freeze(checked),
      })
    })
  }

  /**
   * Refuses further calls. The pool stays open: end it yourself.
   * @example
   * ```ts
   * import type { MysqlShardDirectory } from '@shardflake/mysql'
   * declare const directory: MysqlShardDirectory
   *
   * await directory.close()
   * ```
   */
  async close(): Promise<void> {
    this.closed = true
  }

  private async select(run: RunQuery): Promise<Record<string, unknown>> {
    const rows = await run(
      `SELECT CAST(version AS CHAR) AS version, max_stale_ms, sharding, entries
         FROM ${this.name} WHERE only_row = 1`,
      [],
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

  /** Runs `work` on one connection within the deadline; failures become ShardflakeErrors. */
  private async call<T>(
    action: string,
    signal: AbortSignal | undefined,
    work: (run: RunQuery) => Promise<T>,
  ): Promise<T> {
    if (this.closed) throw new ConfigurationError(`The shard directory ${this.name} is closed.`)
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new InvalidArgumentError(`signal must be an AbortSignal, got ${describeValue(signal)}.`)
    }
    const what = `${action} of the shard directory in table ${this.name}`
    try {
      return await callServer({ pool: this.pool, timeoutMs: this.timeoutMs, signal, what }, work)
    } catch (error) {
      const errno = driverError(error)?.errno
      if (errno !== undefined && MISSING_ERRNOS.has(errno)) throw this.missing(error)
      if (errno === NO_DATABASE) {
        throw new ConfigurationError(
          `The shard directory's pool has no database: put one in its URL (mysql://…/app), or give the directory a database option.`,
          { cause: error },
        )
      }
      throw translateError(error, { what })
    }
  }

  private missing(cause?: unknown): ConfigurationError {
    return new ConfigurationError(
      `There is no shard directory in table ${this.name}${this.database ? '' : " of the pool's database"}: create it once with directory.create(shardMap) (or point database and table at the one the application uses).`,
      cause === undefined ? undefined : { cause },
    )
  }
}
