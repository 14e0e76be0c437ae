import {
  ConfigurationError,
  checkCount,
  type IdSource,
  InvalidArgumentError,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { asDriverError, isConnectionError, routineSignal } from './errors'
import { checkIdentifier, quoteIdentifier } from './identifiers'
import { checkBigNumberConfig } from './pool'
import { MAX_BATCH, type MysqlDialect, SIGNAL_PREFIX } from './sql'

/** Engine of a ticket table. */
export type TicketEngine = 'InnoDB' | 'MyISAM' | 'Aria'

/** Largest increment (the number of ticket servers a sequence can have), as MySQL's own `auto_increment_increment`. */
export const MAX_TICKET_INCREMENT = 65_535

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
 * The SQL of one ticket server (pure, pinned in tests): per sequence a `tickets64_<name>` table
 * whose one row holds the server's next ticket **and the increment and offset it was installed
 * with**, and a function `next_<name>(n, increment, offset)` that hands out `n` tickets with ONE
 * single-row `UPDATE ... SET id = LAST_INSERT_ID(id + increment * n)`, but only when the caller's
 * increment and offset are the recorded ones: a differently configured caller gets
 * `shardflake:MISMATCH:<increment>:<offset>` (SQLSTATE 45000) and nothing is issued. The row itself
 * is written by {@link TicketServerSource.install}, which picks its first ticket (see there).
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
    const table = quoteIdentifier('table', ticketTable(name))
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
  DECLARE recorded_increment BIGINT;
  DECLARE recorded_offset BIGINT;
  DECLARE message VARCHAR(128);
  IF n IS NULL OR n < 1 OR n > ${MAX_BATCH} THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${SIGNAL_PREFIX}COUNT: n must be from 1 to ${MAX_BATCH}';
  END IF;
  UPDATE ${db}.${table} SET \`id\` = LAST_INSERT_ID(\`id\` + \`server_increment\` * n)
   WHERE \`stub\` = 'a' AND \`server_increment\` = step AND \`server_offset\` = start;
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - step * n;
  END IF;
  SET recorded_increment = (SELECT \`server_increment\` FROM ${db}.${table} WHERE \`stub\` = 'a');
  SET recorded_offset = (SELECT \`server_offset\` FROM ${db}.${table} WHERE \`stub\` = 'a');
  IF recorded_increment IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${SIGNAL_PREFIX}TICKETS: no ticket row';
  END IF;
  IF recorded_increment = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '${SIGNAL_PREFIX}PAUSED: a reconfiguration is not finished';
  END IF;
  SET message = CONCAT('${SIGNAL_PREFIX}MISMATCH:', recorded_increment, ':', recorded_offset);
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = message;
END`
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${db}.${table} (\n  \`stub\` CHAR(1) NOT NULL PRIMARY KEY,\n  \`id\` BIGINT UNSIGNED NOT NULL COMMENT 'next ticket of this server',\n  \`server_increment\` INT UNSIGNED NOT NULL COMMENT 'increment it was installed with (0: paused)',\n  \`server_offset\` INT UNSIGNED NOT NULL COMMENT 'offset it was installed with, 1..increment'\n) ENGINE=${engine}`,
      ...head,
    )
  }
  return statements
}

function ticketTable(sequence: string): string {
  return `tickets64_${checkIdentifier('sequence', sequence)}`
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
  /**
   * Distance between two tickets of one server: the number of servers, at most 65,535. Every server
   * records the increment and offset it was installed with, and refuses a source that asks with
   * others (`ConfigurationError`, nothing issued).
   * @default servers.length
   */
  increment?: number
  /**
   * `true`: `install()` records each server's own `@@auto_increment_increment` /
   * `@@auto_increment_offset` (my.cnf, `SET GLOBAL`, or a `SET SESSION` in the pool's connection
   * hook) instead of `increment` and the offsets given here, and refuses servers whose increments
   * differ or whose offsets collide (MariaDB's default is 1/1 everywhere). The source reads the
   * recorded values of each server once and refuses the same way before it issues anything.
   * @default false
   */
  useServerSettings?: boolean
  /** How many logical shards keys are reduced by (tickets ignore the shard). */
  logicalShards?: number
  /** How long a server that could not be reached is skipped, in ms. @default 1000 */
  retryDownMs?: number
}

/** What {@link TicketServerSource.install} takes. */
export interface TicketInstallOptions {
  /** @default 'mariadb' */
  dialect?: MysqlDialect
  /** Engine of a new ticket table. @default 'InnoDB' */
  engine?: TicketEngine
  /**
   * Allow changing the increment or offset a server recorded (adding a server, changing the
   * increment, finishing an interrupted reconfiguration, or upgrading a table of an earlier
   * version that recorded none). Every server of the source must be reachable: all are paused
   * first (they refuse every caller), then every counter restarts above the highest counter of
   * them all, in its new residue class, so no ticket of the new configuration can meet one of
   * the old. Callers still configured the old way are refused from then on.
   * @default false
   */
  reconfigure?: boolean
  /**
   * New and reconfigured counters start above this ticket too: use it when a server that left
   * (and cannot be read) may have handed out tickets above the others' counters, e.g. the highest
   * ID in your tables.
   * @default 0n
   */
  startAbove?: bigint
}

/** Increment and offset of one server. */
interface TicketSettings {
  increment: number
  offset: number
}

interface ServerEntry {
  pool: Pool
  offset: number
  database: string
  downUntil: number
  /** Position in `servers`, for messages. */
  index: number
  /** `db`.`tickets64_<sequence>` */
  table: string
  /** The statement that draws tickets. */
  sql: string
  /** With `useServerSettings`: what the server recorded, once read. */
  recorded?: TicketSettings
}

/** The ticket row of a server as `install()` reads it. */
interface TicketRow {
  id: bigint
  /** 0 when paused, or when the table is of an earlier version that recorded nothing. */
  increment: number
  offset: number
  /** The table has no `server_increment`/`server_offset` columns (made by an earlier version). */
  legacy: boolean
}

const NOT_INSTALLED = new Set(['ER_BAD_DB_ERROR', 'ER_NO_SUCH_TABLE', 'ER_SP_DOES_NOT_EXIST'])

/**
 * Flickr-style ticket servers (seed 002): N MySQL/MariaDB servers, server k hands out
 * k, k + N, k + 2N, ...; calls go round-robin, and a server that cannot be reached is skipped, so
 * with one server down IDs keep coming from the others, none repeated.
 *
 * Each server records the increment and offset it was installed with and hands out tickets only
 * to a source that asks with exactly those (else `ConfigurationError`, nothing issued): a second
 * deployment configured with fewer servers, another increment or swapped offsets cannot draw
 * another server's tickets. Changing them goes through `install({ reconfigure: true })`.
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
  /** The configured increment (with `useServerSettings`, the servers' recorded one is used). */
  readonly increment: number
  private readonly servers: ServerEntry[]
  private readonly database: string
  private readonly useServerSettings: boolean
  private readonly retryDownMs: number
  private learning: Promise<void> | undefined
  private next = 0

  /**
   * @throws ConfigurationError for offsets that do not form 1..increment without repeats, an
   * increment above 65,535, or the same pool and database given twice.
   */
  constructor(options: TicketServerSourceOptions) {
    if (options.servers.length === 0) throw new ConfigurationError('servers must not be empty.')
    this.sequence = checkIdentifier('sequence', options.sequence)
    this.database = checkIdentifier('database', options.database ?? 'tickets')
    this.increment = options.increment ?? options.servers.length
    this.useServerSettings = options.useServerSettings ?? false
    this.retryDownMs = options.retryDownMs ?? 1000
    this.logicalShards = options.logicalShards
    const table = ticketTable(this.sequence)
    this.servers = options.servers.map((server, index) => {
      const entry = 'pool' in server && !('query' in server) ? server : { pool: server as Pool }
      const database = checkIdentifier('database', entry.database ?? this.database)
      return {
        pool: entry.pool,
        offset: entry.offset ?? index + 1,
        database,
        downUntil: 0,
        index,
        table: `\`${database}\`.\`${table}\``,
        sql: `SELECT CAST(\`${database}\`.\`next_${this.sequence}\`(?, ?, ?) AS CHAR) AS v`,
      }
    })
    const offsets = new Set(this.servers.map((s) => s.offset))
    if (
      !Number.isSafeInteger(this.increment) ||
      this.increment < this.servers.length ||
      this.increment > MAX_TICKET_INCREMENT ||
      offsets.size !== this.servers.length ||
      [...offsets].some((o) => !Number.isSafeInteger(o) || o < 1 || o > this.increment)
    ) {
      throw new ConfigurationError(
        `Ticket servers need distinct offsets from 1 to increment (${this.increment}, at most ${MAX_TICKET_INCREMENT}), one per server.`,
      )
    }
    for (const [i, a] of this.servers.entries()) {
      if (this.servers.slice(0, i).some((b) => b.pool === a.pool && b.database === a.database)) {
        throw new ConfigurationError(
          `Ticket server ${i} repeats the pool and database ${a.database} of an earlier server.`,
        )
      }
    }
    for (const { pool } of this.servers) checkBigNumberConfig(pool, 'TicketServerSource')
  }

  /**
   * Creates the database, table and function on every server (all must be reachable) and records
   * each server's increment and offset in its ticket row (idempotent: a row that already holds
   * this configuration is kept with its counter).
   *
   * A new server's counter starts above the highest counter of the others (so it cannot meet a
   * ticket they issued under an earlier configuration); in a new cluster that is its offset.
   * A server that holds another increment or offset is refused (`ConfigurationError`, nothing
   * changed) unless `reconfigure: true`: then every server is paused, and every counter restarts
   * above the highest of them all, in its new residue class.
   *
   * @example
   * ```ts
   * // two servers so far (increment 2); add a third: every counter moves above the highest
   * const three = new TicketServerSource({ servers: [poolA, poolB, poolC], sequence: 'photos' })
   * await three.install({ reconfigure: true })
   * ```
   * @throws ConfigurationError for a server that holds another configuration (without
   * `reconfigure`), or, with `useServerSettings`, servers whose settings collide.
   */
  async install(options: TicketInstallOptions = {}): Promise<void> {
    const startAbove = options.startAbove ?? 0n
    if (typeof startAbove !== 'bigint' || startAbove < 0n) {
      throw new InvalidArgumentError('startAbove must be a bigint of at least 0n.')
    }
    const wanted = this.useServerSettings
      ? await this.everyServer((server) => this.serverVariables(server))
      : this.servers.map((server) => ({ increment: this.increment, offset: server.offset }))
    if (this.useServerSettings) {
      checkSettings(
        this.servers.map((server, i) => ({ server, settings: wanted[i]! })),
        'The servers settings (@@auto_increment_increment / @@auto_increment_offset)',
        'Nothing was changed.',
      )
    }
    // What every server holds now; nothing is changed before all were read.
    const rows = await this.everyServer((server) => this.readRow(server))
    const changed = this.servers.filter((_, i) => {
      const row = rows[i]
      return row !== undefined && !sameSettings(row, wanted[i]!)
    })
    if (changed.length > 0 && !options.reconfigure) {
      const list = changed
        .map((server) => {
          const row = rows[server.index]!
          const holds = row.legacy
            ? 'a table of an earlier version that recorded no increment and offset'
            : row.increment === 0
              ? 'a row paused by an unfinished reconfiguration'
              : `increment ${row.increment}, offset ${row.offset}`
          return `server ${server.index} (database ${server.database}) holds ${holds}, this source wants increment ${wanted[server.index]!.increment}, offset ${wanted[server.index]!.offset}`
        })
        .join('; ')
      throw new ConfigurationError(
        `Ticket sequence ${this.sequence}: ${list}. Nothing was changed. Changing a server's increment or offset needs install({ reconfigure: true }), which pauses every server and restarts every counter above the highest.`,
      )
    }
    for (const [i, server] of this.servers.entries()) {
      if (rows[i]?.legacy) {
        // Paused (increment 0) until the reconfiguration below records its values.
        await server.pool.query(
          `ALTER TABLE ${server.table} ADD COLUMN \`server_increment\` INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'increment it was installed with (0: paused)', ADD COLUMN \`server_offset\` INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'offset it was installed with, 1..increment'`,
        )
      }
      const statements = ticketServerStatements({
        sequences: [this.sequence],
        database: server.database,
        ...(options.dialect ? { dialect: options.dialect } : {}),
        ...(options.engine ? { engine: options.engine } : {}),
      })
      for (const statement of statements) await server.pool.query(statement)
    }
    if (changed.length > 0) {
      // Phase 1: pause every existing row (each refuses every caller from now on), then read the
      // counters: no server issues a ticket of the old configuration after this.
      for (const [i, server] of this.servers.entries()) {
        if (!rows[i]) continue
        await server.pool.query(
          `UPDATE ${server.table} SET \`server_increment\` = 0, \`server_offset\` = 0 WHERE \`stub\` = 'a'`,
        )
        rows[i] = await this.readRow(server)
      }
    }
    // Every ticket issued so far is below every existing counter's maximum.
    let floor = startAbove + 1n
    for (const row of rows) if (row && row.id > floor) floor = row.id
    for (const [i, server] of this.servers.entries()) {
      const settings = wanted[i]!
      const first = firstTicket(floor, settings)
      if (!rows[i]) {
        await server.pool.query(
          `INSERT IGNORE INTO ${server.table} (\`stub\`, \`id\`, \`server_increment\`, \`server_offset\`) VALUES ('a', ?, ?, ?)`,
          [first.toString(), settings.increment, settings.offset],
        )
      } else if (changed.length > 0) {
        // Phase 2: the new configuration, above every counter of phase 1.
        await server.pool.query(
          `UPDATE ${server.table} SET \`id\` = ?, \`server_increment\` = ?, \`server_offset\` = ? WHERE \`stub\` = 'a' AND \`server_increment\` = 0`,
          [first.toString(), settings.increment, settings.offset],
        )
      }
    }
    for (const [i, server] of this.servers.entries()) {
      const row = await this.readRow(server)
      if (!row || !sameSettings(row, wanted[i]!)) {
        throw new ConfigurationError(
          `Ticket server ${i} (database ${server.database}) did not record increment ${wanted[i]!.increment}, offset ${wanted[i]!.offset}: another install ran at the same time, or two servers of this source are one table.`,
        )
      }
    }
    this.forgetSettings()
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
    if (this.useServerSettings) await this.learnAll()
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

  private async draw(server: ServerEntry, count: number): Promise<bigint[]> {
    const settings = this.useServerSettings
      ? await this.recordedSettings(server)
      : { increment: this.increment, offset: server.offset }
    let rows: unknown
    try {
      ;[rows] = await server.pool.query(server.sql, [count, settings.increment, settings.offset])
    } catch (error) {
      throw this.translate(error, server, settings)
    }
    const value = (rows as { v?: unknown }[])[0]?.v
    if (typeof value !== 'string' || !/^\d+$/.test(value)) {
      throw new ConfigurationError(`Ticket server returned no ticket for ${this.sequence}.`)
    }
    const first = BigInt(value)
    const step = BigInt(settings.increment)
    return Array.from({ length: count }, (_, i) => first + step * BigInt(i))
  }

  /** Connection errors unchanged (the caller fails over); the rest as ShardflakeErrors. */
  private translate(error: unknown, server: ServerEntry, asked: TicketSettings): unknown {
    const where = `Ticket server ${server.index} (database ${server.database}) of sequence ${this.sequence}`
    const signal = routineSignal(error)
    if (signal) {
      switch (signal.kind) {
        case 'MISMATCH': {
          this.forgetSettings()
          const [increment, offset] = signal.rest.split(':')
          return new ConfigurationError(
            `${where} hands out tickets with increment ${increment}, offset ${offset}; this source asked with increment ${asked.increment}, offset ${asked.offset}. Nothing was issued: two configurations would hand out the same tickets. Configure the recorded values, or change every server with install({ reconfigure: true }).`,
          )
        }
        case 'PAUSED':
          this.forgetSettings()
          return new ConfigurationError(
            `${where} is paused by a reconfiguration that did not finish: run install({ reconfigure: true }) with the new configuration. Nothing was issued.`,
          )
        case 'COUNT':
          return new InvalidArgumentError(`${where}: ${signal.rest.trim()}`)
        default:
          return new ConfigurationError(`${where} has no ticket row: run install() there.`)
      }
    }
    const code = asDriverError(error)?.code
    if (code && NOT_INSTALLED.has(code)) {
      return new ConfigurationError(`${where} is not installed: run install() there. (${code})`)
    }
    return error
  }

  /** `read` on every server; one that cannot be reached fails the whole call. */
  private async everyServer<T>(read: (server: ServerEntry) => Promise<T>): Promise<T[]> {
    return await Promise.all(
      this.servers.map(async (server) => {
        try {
          return await read(server)
        } catch (error) {
          if (!isConnectionError(error)) throw error
          throw new SourceUnavailableError(
            `Ticket server ${server.index} (database ${server.database}) could not be reached: install() needs every server of the source. Nothing was changed.`,
            { cause: error },
          )
        }
      }),
    )
  }

  /** The row as install() sees it; undefined when there is none. Connection errors thrown. */
  private async readRow(server: ServerEntry): Promise<TicketRow | undefined> {
    try {
      const [rows] = await server.pool.query(
        `SELECT CAST(\`id\` AS CHAR) AS id, \`server_increment\` AS inc, \`server_offset\` AS off FROM ${server.table} WHERE \`stub\` = 'a'`,
      )
      const row = (rows as { id: string; inc: unknown; off: unknown }[])[0]
      if (!row) return undefined
      return {
        id: BigInt(row.id),
        increment: Number(row.inc),
        offset: Number(row.off),
        legacy: false,
      }
    } catch (error) {
      const code = asDriverError(error)?.code
      if (code === 'ER_BAD_DB_ERROR' || code === 'ER_NO_SUCH_TABLE') return undefined
      if (code !== 'ER_BAD_FIELD_ERROR') throw error
    }
    const [rows] = await server.pool.query(
      `SELECT CAST(\`id\` AS CHAR) AS id FROM ${server.table} WHERE \`stub\` = 'a'`,
    )
    const row = (rows as { id: string }[])[0]
    return row ? { id: BigInt(row.id), increment: 0, offset: 0, legacy: true } : undefined
  }

  /** The server's own `@@auto_increment_increment` / `@@auto_increment_offset`. */
  private async serverVariables(server: ServerEntry): Promise<TicketSettings> {
    const [rows] = await server.pool.query(
      'SELECT CAST(@@auto_increment_increment AS CHAR) AS inc, CAST(@@auto_increment_offset AS CHAR) AS off',
    )
    const row = (rows as { inc: string; off: string }[])[0]!
    return { increment: Number(row.inc), offset: Number(row.off) }
  }

  /** With `useServerSettings`: read every reachable server's recorded values once, check them. */
  private learnAll(): Promise<void> {
    if (!this.learning) {
      const learning = (async () => {
        const results = await Promise.allSettled(
          this.servers.map((server) => this.readRecorded(server)),
        )
        const now = Date.now()
        for (const [i, result] of results.entries()) {
          const server = this.servers[i]!
          if (result.status === 'fulfilled') server.recorded = result.value
          else if (isConnectionError(result.reason)) server.downUntil = now + this.retryDownMs
          else throw result.reason
        }
        const known = this.servers.flatMap((server) =>
          server.recorded ? [{ server, settings: server.recorded }] : [],
        )
        checkSettings(known, 'The recorded settings', 'Nothing was issued.')
      })()
      this.learning = learning
      learning.catch(() => this.forgetSettings())
    }
    return this.learning
  }

  /** A server's recorded values; a server that was down at first is read and checked now. */
  private async recordedSettings(server: ServerEntry): Promise<TicketSettings> {
    if (server.recorded) return server.recorded
    const settings = await this.readRecorded(server)
    const others = this.servers.flatMap((other) =>
      other !== server && other.recorded ? [{ server: other, settings: other.recorded }] : [],
    )
    checkSettings([...others, { server, settings }], 'The recorded settings', 'Nothing was issued.')
    server.recorded = settings
    return settings
  }

  private async readRecorded(server: ServerEntry): Promise<TicketSettings> {
    let rows: unknown
    try {
      ;[rows] = await server.pool.query(
        `SELECT \`server_increment\` AS inc, \`server_offset\` AS off FROM ${server.table} WHERE \`stub\` = 'a'`,
      )
    } catch (error) {
      if (isConnectionError(error)) throw error
      throw new ConfigurationError(
        `Ticket server ${server.index} (database ${server.database}) has no ticket table of this version for sequence ${this.sequence}: run install(). (${asDriverError(error)?.code ?? String(error)})`,
      )
    }
    const row = (rows as { inc: unknown; off: unknown }[])[0]
    if (!row) {
      throw new ConfigurationError(
        `Ticket server ${server.index} (database ${server.database}) has no ticket row: run install().`,
      )
    }
    const settings = { increment: Number(row.inc), offset: Number(row.off) }
    if (settings.increment === 0) {
      throw new ConfigurationError(
        `Ticket server ${server.index} (database ${server.database}) is paused by a reconfiguration that did not finish: run install({ reconfigure: true }).`,
      )
    }
    return settings
  }

  private forgetSettings(): void {
    this.learning = undefined
    for (const server of this.servers) server.recorded = undefined
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

function sameSettings(a: TicketSettings, b: TicketSettings): boolean {
  return a.increment === b.increment && a.offset === b.offset
}

/** The smallest ticket >= floor (and >= 1) of the residue class of `offset` modulo `increment`. */
function firstTicket(floor: bigint, { increment, offset }: TicketSettings): bigint {
  const from = floor < 1n ? 1n : floor
  const step = BigInt(increment)
  return from + ((((BigInt(offset) - from) % step) + step) % step)
}

/**
 * Throws unless the servers share one increment (1..65,535) and their offsets are distinct and
 * within 1..increment: only then are their residue classes disjoint.
 */
function checkSettings(
  entries: readonly { server: ServerEntry; settings: TicketSettings }[],
  what: string,
  outcome: string,
): void {
  const increments = new Set(entries.map((e) => e.settings.increment))
  const offsets = new Set(entries.map((e) => e.settings.offset))
  const valid =
    increments.size <= 1 &&
    offsets.size === entries.length &&
    entries.every(
      ({ settings: { increment, offset } }) =>
        Number.isSafeInteger(increment) &&
        Number.isSafeInteger(offset) &&
        increment >= 1 &&
        increment <= MAX_TICKET_INCREMENT &&
        offset >= 1 &&
        offset <= increment,
    )
  if (!valid) {
    const list = entries
      .map(
        ({ server, settings }) =>
          `server ${server.index} (database ${server.database}): increment ${settings.increment}, offset ${settings.offset}`,
      )
      .join('; ')
    throw new ConfigurationError(
      `${what} of the ticket servers would hand out the same tickets (${list}). They need one increment and distinct offsets from 1 to it (e.g. auto_increment_increment=2 and auto_increment_offset=1 and 2 in each server's my.cnf). ${outcome}`,
    )
  }
}
