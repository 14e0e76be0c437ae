import {
  ConfigurationError,
  checkCount,
  type IdSource,
  InvalidArgumentError,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { isConnectionError, routineSignal } from './errors'
import { checkIdentifier, quoteIdentifier } from './identifiers'
import { checkBigNumberConfig } from './pool'
import { MAX_BATCH, type MysqlDialect, SIGNAL_PREFIX } from './sql'

/** Engine of a ticket table. */
export type TicketEngine = 'InnoDB' | 'MyISAM' | 'Aria'

/** What {@link ticketServerStatements} takes. */
export interface TicketSqlOptions {
  /** Sequence names, one `tickets64_<name>` table each (`photos`, `accounts`, ...). */
  sequences: readonly string[]
  /** @default 'tickets' */
  database?: string
  /** @default 'mariadb' */
  dialect?: MysqlDialect
  /**
   * `InnoDB` (durable, one row lock per call, no deadlocks with this statement), or Flickr's
   * original `MyISAM` (faster, table lock, but the counter can go back after an OS crash).
   * @default 'InnoDB'
   */
  engine?: TicketEngine
}

/**
 * The SQL of one ticket server (pure, pinned in tests): per sequence a `tickets64_<name>` table with
 * one stub row, and a function `next_<name>(n, increment, offset)` that hands out `n` tickets of
 * this server's residue class with ONE single-row `UPDATE ... SET id = LAST_INSERT_ID(id + increment * n)`.
 * `increment`/`offset` NULL means the server's `@@auto_increment_increment`/`@@auto_increment_offset`
 * (my.cnf, `SET GLOBAL` or `SET SESSION`).
 *
 * Why not `REPLACE INTO Tickets64 (stub) VALUES ('a')`: on InnoDB REPLACE is a delete plus an
 * insert on a unique key, taking next-key and insert-intention locks, and concurrent callers
 * deadlock (measured: 93-222 of 20,000 calls from 16 connections). Updating a non-key column of one
 * row by its primary key takes one record lock, so callers queue and never deadlock.
 *
 * @example
 * ```ts
 * for (const s of ticketServerStatements({ sequences: ['photos'] })) await pool.query(s)
 * ```
 */
export function ticketServerStatements(options: TicketSqlOptions): string[] {
  const db = quoteIdentifier('database', options.database ?? 'tickets')
  const dialect = options.dialect ?? 'mariadb'
  const engine = options.engine ?? 'InnoDB'
  if (!['InnoDB', 'MyISAM', 'Aria'].includes(engine)) {
    throw new InvalidArgumentError('engine must be InnoDB, MyISAM or Aria.')
  }
  if (options.sequences.length === 0) throw new InvalidArgumentError('sequences must not be empty.')
  const statements = [`CREATE DATABASE IF NOT EXISTS ${db}`]
  for (const name of options.sequences) {
    const table = quoteIdentifier('table', `tickets64_${checkIdentifier('sequence', name)}`)
    const fn = quoteIdentifier('function', `next_${name}`)
    const head =
      dialect === 'mariadb'
        ? [`CREATE OR REPLACE FUNCTION ${db}.${fn}`]
        : [`DROP FUNCTION IF EXISTS ${db}.${fn}`, `CREATE FUNCTION ${db}.${fn}`]
    const last = head.length - 1
    head[last] += `(n INT, step INT, start INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake ticket server: n tickets in one single-row UPDATE, returns the first'
BEGIN
  DECLARE inc BIGINT UNSIGNED DEFAULT COALESCE(step, @@auto_increment_increment);
  DECLARE off BIGINT UNSIGNED DEFAULT COALESCE(start, @@auto_increment_offset);
  IF n IS NULL OR n < 1 OR n > ${MAX_BATCH} THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${SIGNAL_PREFIX}COUNT: n must be from 1 to ${MAX_BATCH}';
  END IF;
  UPDATE ${db}.${table} SET \`id\` = LAST_INSERT_ID(\`id\` + inc * n)
   WHERE \`stub\` = 'a' AND MOD(\`id\`, inc) = MOD(off, inc);
  IF ROW_COUNT() <> 1 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${SIGNAL_PREFIX}TICKETS: no ticket row for this increment and offset';
  END IF;
  RETURN LAST_INSERT_ID() - inc * n;
END`
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${db}.${table} (\n  \`stub\` CHAR(1) NOT NULL PRIMARY KEY,\n  \`id\` BIGINT UNSIGNED NOT NULL COMMENT 'next ticket of this server'\n) ENGINE=${engine}`,
      ...head,
    )
  }
  return statements
}

/** One ticket server: a pool and its offset (1..increment). */
export interface TicketServer {
  pool: Pool
  /** This server's offset, 1..increment. @default its position in `servers` + 1 */
  offset?: number
  /** The database of the ticket tables on this server. @default the source's `database` */
  database?: string
}

/** What {@link TicketServerSource} takes. */
export interface TicketServerSourceOptions {
  /** The ticket servers, in offset order unless offsets are given. */
  servers: readonly (Pool | TicketServer)[]
  /** The sequence name (`photos` uses table `tickets64_photos`). */
  sequence: string
  /** @default 'tickets' */
  database?: string
  /** Distance between two tickets of one server: the number of servers. @default servers.length */
  increment?: number
  /**
   * `true`: use each server's own `@@auto_increment_increment` / `@@auto_increment_offset`
   * (my.cnf, `SET GLOBAL`, or a `SET SESSION` in the pool's connection hook) instead of `increment`
   * and the offsets given here.
   * @default false
   */
  useServerSettings?: boolean
  /** How many logical shards keys are reduced by (tickets ignore the shard). */
  logicalShards?: number
  /** How long a server that could not be reached is skipped, in ms. @default 1000 */
  retryDownMs?: number
}

/**
 * Flickr-style ticket servers (seed 002): N MySQL/MariaDB servers, server k hands out
 * k, k + N, k + 2N, ...; calls go round-robin, and a server that cannot be reached is skipped, so
 * with one server down IDs keep coming from the others, none repeated.
 *
 * **These IDs are plain integers: no time, no shard** (`layout` is `undefined`). They cannot be
 * decoded, are not time-ordered across servers, and `sameShardAs` routing cannot use them. Choose
 * them when you need short, dense, unique integers and one place to hand them out (Flickr's photo
 * IDs), not when a row's shard or age must be read from its ID.
 *
 * @example
 * ```ts
 * const source = new TicketServerSource({ servers: [poolA, poolB], sequence: 'photos' })
 * await source.install()
 * const id = await source.nextId(0) // 1, 3, 5 ... from A and 2, 4, 6 ... from B
 * ```
 */
export class TicketServerSource implements IdSource {
  readonly layout = undefined
  readonly synchronous = false
  readonly logicalShards: number | undefined
  readonly sequence: string
  readonly increment: number
  private readonly servers: { pool: Pool; offset: number; database: string; downUntil: number }[]
  private readonly database: string
  private readonly useServerSettings: boolean
  private readonly retryDownMs: number
  private next = 0

  /** @throws ConfigurationError for offsets that do not form 1..increment without repeats. */
  constructor(options: TicketServerSourceOptions) {
    if (options.servers.length === 0) throw new ConfigurationError('servers must not be empty.')
    this.sequence = checkIdentifier('sequence', options.sequence)
    this.database = checkIdentifier('database', options.database ?? 'tickets')
    this.increment = options.increment ?? options.servers.length
    this.useServerSettings = options.useServerSettings ?? false
    this.retryDownMs = options.retryDownMs ?? 1000
    this.logicalShards = options.logicalShards
    this.servers = options.servers.map((server, index) => {
      const entry = 'pool' in server && !('query' in server) ? server : { pool: server as Pool }
      return {
        pool: entry.pool,
        offset: entry.offset ?? index + 1,
        database: checkIdentifier('database', entry.database ?? this.database),
        downUntil: 0,
      }
    })
    const offsets = new Set(this.servers.map((s) => s.offset))
    if (
      !Number.isSafeInteger(this.increment) ||
      this.increment < this.servers.length ||
      offsets.size !== this.servers.length ||
      [...offsets].some((o) => !Number.isSafeInteger(o) || o < 1 || o > this.increment)
    ) {
      throw new ConfigurationError(
        `Ticket servers need distinct offsets from 1 to increment (${this.increment}), one per server.`,
      )
    }
    for (const { pool } of this.servers) checkBigNumberConfig(pool, 'TicketServerSource')
  }

  /**
   * Creates the database, table and function on every server and seeds each server's row with
   * its offset (idempotent; an existing row is kept).
   */
  async install(options: { dialect?: MysqlDialect; engine?: TicketEngine } = {}): Promise<void> {
    for (const server of this.servers) {
      const statements = ticketServerStatements({
        sequences: [this.sequence],
        database: server.database,
        ...options,
      })
      for (const statement of statements) await server.pool.query(statement)
      await server.pool.query(
        `INSERT IGNORE INTO \`${server.database}\`.\`tickets64_${this.sequence}\` (\`stub\`, \`id\`) VALUES ('a', ${
          this.useServerSettings ? '@@auto_increment_offset' : String(server.offset)
        })`,
      )
    }
  }

  /** One new ticket. `shard` is only checked (tickets carry no shard). */
  async nextId(shard: number): Promise<bigint> {
    const [id] = await this.nextIds(shard, 1)
    return id!
  }

  /** `count` new ascending tickets from one server, in one round trip. */
  async nextIds(shard: number, count: number): Promise<bigint[]> {
    this.checkShard(shard)
    checkCount(count)
    if (count > MAX_BATCH) {
      throw new InvalidArgumentError(`count must be at most ${MAX_BATCH}, got ${count}.`)
    }
    const n = this.servers.length
    const start = this.next++ % n
    const now = Date.now()
    const order = Array.from({ length: n }, (_, k) => this.servers[(start + k) % n]!)
    const candidates = order.filter((s) => s.downUntil <= now)
    const errors: unknown[] = []
    for (const server of candidates.length > 0 ? candidates : order) {
      try {
        return await this.draw(server, count)
      } catch (error) {
        if (!isConnectionError(error)) throw error
        server.downUntil = Date.now() + this.retryDownMs
        errors.push(error)
      }
    }
    throw new SourceUnavailableError(
      `None of the ${n} ticket servers of sequence ${this.sequence} could be reached.`,
      { cause: errors[errors.length - 1] },
    )
  }

  /** Does nothing: the pools belong to the caller. */
  close(): void {}

  private async draw(
    server: { pool: Pool; offset: number; database: string },
    count: number,
  ): Promise<bigint[]> {
    const params = this.useServerSettings
      ? [count, null, null]
      : [count, this.increment, server.offset]
    let rows: unknown
    try {
      ;[rows] = await server.pool.query(
        `SELECT CAST(\`${server.database}\`.\`next_${this.sequence}\`(?, ?, ?) AS CHAR) AS v, CAST(COALESCE(?, @@auto_increment_increment) AS CHAR) AS inc`,
        [...params, params[1]],
      )
    } catch (error) {
      const signal = routineSignal(error)
      if (signal)
        throw new ConfigurationError(`Ticket server: ${signal.kind}: ${signal.rest.trim()}`)
      throw error
    }
    const row = (rows as { v?: unknown; inc?: unknown }[])[0]
    if (typeof row?.v !== 'string' || typeof row.inc !== 'string') {
      throw new ConfigurationError(`Ticket server returned no ticket for ${this.sequence}.`)
    }
    const first = BigInt(row.v)
    const step = BigInt(row.inc)
    return Array.from({ length: count }, (_, i) => first + step * BigInt(i))
  }

  private checkShard(shard: number): void {
    const limit = this.logicalShards ?? 2 ** 31 - 1
    if (!Number.isInteger(shard) || shard < 0 || shard >= limit) {
      throw new ShardOutOfRangeError(
        shard,
        `Shard ${String(shard)} is outside 0 to ${limit - 1} (ticket IDs carry no shard, but the shard is still checked).`,
      )
    }
  }
}
