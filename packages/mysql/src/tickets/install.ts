import {
  ConfigurationError,
  InvalidArgumentError,
  SourceUnavailableError,
  withDeadline,
} from '@shardflake/core'
import { driverError, isServerFailure, translateError } from '../errors'
import type { MysqlDialect } from '../sql/options'
import {
  checkSettings,
  firstTicket,
  resolveTicketConfig,
  type ServerEntry,
  sameSettings,
  type TicketServersOptions,
  type TicketSettings,
} from './config'
import { type TicketEngine, ticketServerSql } from './sql'

/** What {@link installTicketServers} takes: the servers, as the source gets them, and how to install. */
export interface InstallTicketServersOptions extends TicketServersOptions {
  /** @default 'mariadb' */
  dialect?: MysqlDialect
  /** Engine of a new ticket table. @default 'InnoDB' */
  engine?: TicketEngine
  /**
   * Allow changing the increment or offset a server recorded (adding a server, changing the
   * increment, finishing an interrupted reconfiguration). Every server must be reachable: all
   * are paused first (they refuse every caller), then every counter restarts above the highest
   * counter of them all, in its new residue class, so no ticket of the new configuration can
   * meet one of the old.
   * @default false
   */
  reconfigure?: boolean
  /**
   * New and reconfigured counters start above this ticket too: use it when a server that left
   * (and cannot be read) may have handed out tickets above the others' counters.
   * @default 0n
   */
  startAbove?: bigint
}

/** The ticket row of a server as the installer reads it. */
interface TicketRow {
  id: bigint
  /** 0 when paused, or when the table is of an earlier version that recorded nothing. */
  increment: number
  offset: number
  /** The table has no `server_increment`/`server_offset` columns (made by an earlier version). */
  legacy: boolean
}

/**
 * Creates the database, table and function of a ticket sequence on every server (all must be
 * reachable) and records each server's increment and offset in its ticket row. Idempotent: a
 * row that already holds this configuration keeps its counter. A new server's counter starts
 * above the highest counter of the others. A server that holds another increment or offset is
 * refused (nothing changed) unless `reconfigure: true`.
 *
 * @example
 * ```ts
 * import { createMysqlPool, installTicketServers, TicketServerSource } from '@shardflake/mysql'
 *
 * const servers = [
 *   await createMysqlPool('mysql://root@tickets-a:3306/tickets'),
 *   await createMysqlPool('mysql://root@tickets-b:3306/tickets'),
 * ]
 * await installTicketServers({ servers, sequence: 'photos' })
 * const source = new TicketServerSource({ servers, sequence: 'photos' })
 * ```
 * @throws ConfigurationError for a server that holds another configuration (without
 *   `reconfigure`), or, with `useServerSettings`, servers whose settings collide.
 * @throws SourceUnavailableError when a server cannot be reached (nothing changed).
 */
export async function installTicketServers(options: InstallTicketServersOptions): Promise<void> {
  const config = resolveTicketConfig(options, 'installTicketServers', [
    'dialect',
    'engine',
    'reconfigure',
    'startAbove',
  ])
  const { servers, sequence } = config
  const startAbove = options.startAbove ?? 0n
  if (typeof startAbove !== 'bigint' || startAbove < 0n) {
    throw new InvalidArgumentError('startAbove must be a bigint of at least 0n.')
  }
  const wanted: TicketSettings[] = config.useServerSettings
    ? await everyServer(servers, serverVariables, config.timeoutMs)
    : servers.map((server) => ({ increment: config.increment, offset: server.offset }))
  if (config.useServerSettings) {
    checkSettings(
      servers.map((server, i) => ({ server, settings: wanted[i]! })),
      'The servers settings (@@auto_increment_increment / @@auto_increment_offset)',
      'Nothing was changed.',
    )
  }
  // What every server holds now; nothing is changed before all were read.
  const rows = await everyServer(servers, readRow, config.timeoutMs)
  const changed = servers.filter((_, i) => {
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
      `Ticket sequence ${sequence}: ${list}. Nothing was changed. Changing a server's increment or offset needs installTicketServers({ reconfigure: true }), which pauses every server and restarts every counter above the highest.`,
    )
  }
  try {
    for (const [i, server] of servers.entries()) {
      if (rows[i]?.legacy) {
        // Paused (increment 0) until the reconfiguration below records its values.
        await server.pool.query(
          `ALTER TABLE ${server.table} ADD COLUMN \`server_increment\` INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'increment it was installed with (0: paused)', ADD COLUMN \`server_offset\` INT UNSIGNED NOT NULL DEFAULT 0 COMMENT 'offset it was installed with, 1..increment'`,
        )
      }
      const ddl = ticketServerSql({
        sequences: [sequence],
        database: server.database,
        ...(options.dialect ? { dialect: options.dialect } : {}),
        ...(options.engine ? { engine: options.engine } : {}),
      })
      const connection = await server.pool.getConnection()
      try {
        for (const statement of ddl.statements) await connection.query(statement)
        connection.release()
      } catch (error) {
        connection.destroy()
        throw error
      }
    }
    if (changed.length > 0) {
      // Phase 1: pause every existing row (each refuses every caller from now on), then read the
      // counters: no server issues a ticket of the old configuration after this.
      for (const [i, server] of servers.entries()) {
        if (!rows[i]) continue
        await server.pool.query(
          `UPDATE ${server.table} SET \`server_increment\` = 0, \`server_offset\` = 0 WHERE \`stub\` = 'a'`,
        )
        rows[i] = await readRow(server)
      }
    }
    // Every ticket issued so far is below every existing counter's maximum.
    let floor = startAbove + 1n
    for (const row of rows) if (row && row.id > floor) floor = row.id
    for (const [i, server] of servers.entries()) {
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
    for (const [i, server] of servers.entries()) {
      const row = await readRow(server)
      if (!row || !sameSettings(row, wanted[i]!)) {
        throw new ConfigurationError(
          `${server.what} did not record increment ${wanted[i]!.increment}, offset ${wanted[i]!.offset}: another install ran at the same time, or two servers of this source are one table.`,
        )
      }
    }
  } catch (error) {
    throw translateError(error, { what: `ticket sequence ${sequence}` })
  }
}

/**
 * `read` on every server; one that cannot be reached, or does not answer within `timeoutMs`,
 * fails the whole call before anything is changed.
 */
async function everyServer<T>(
  servers: readonly ServerEntry[],
  read: (server: ServerEntry) => Promise<T>,
  timeoutMs: number,
): Promise<T[]> {
  return await Promise.all(
    servers.map(async (server) => {
      try {
        return await withDeadline(() => read(server), { timeoutMs, what: server.what })
      } catch (error) {
        const translated = translateError(error, { what: server.what })
        if (!isServerFailure(translated)) throw translated
        throw new SourceUnavailableError(
          `${server.what} could not be reached, or did not answer within ${timeoutMs} ms: installTicketServers needs every server of the sequence. Nothing was changed.`,
          { cause: error },
        )
      }
    }),
  )
}

/** The row as the installer sees it; undefined when there is none. */
async function readRow(server: ServerEntry): Promise<TicketRow | undefined> {
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
    const errno = driverError(error)?.errno
    if (errno === 1049 || errno === 1146) return undefined // no database, no table
    if (errno !== 1054) throw error // ER_BAD_FIELD_ERROR: a table of an earlier version
  }
  const [rows] = await server.pool.query(
    `SELECT CAST(\`id\` AS CHAR) AS id FROM ${server.table} WHERE \`stub\` = 'a'`,
  )
  const row = (rows as { id: string }[])[0]
  return row ? { id: BigInt(row.id), increment: 0, offset: 0, legacy: true } : undefined
}

/** The server's own `@@auto_increment_increment` / `@@auto_increment_offset`. */
async function serverVariables(server: ServerEntry): Promise<TicketSettings> {
  const [rows] = await server.pool.query(
    'SELECT CAST(@@auto_increment_increment AS CHAR) AS inc, CAST(@@auto_increment_offset AS CHAR) AS off',
  )
  const row = (rows as { inc: string; off: string }[])[0]!
  return { increment: Number(row.inc), offset: Number(row.off) }
}
