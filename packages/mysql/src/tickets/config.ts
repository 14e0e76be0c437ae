import {
  ConfigurationError,
  checkKnownOptions,
  describeValue,
  InvalidArgumentError,
  readSourceDuration,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { driverError } from '../errors'
import { checkIdentifier } from '../identifiers'
import { checkBigNumberConfig, checkPool } from '../pool'
import { ticketTable } from './sql'

/** Largest increment (the number of ticket servers a sequence can have), as MySQL's own `auto_increment_increment`. */
export const MAX_TICKET_INCREMENT = 65_535

/** One ticket server: a pool and its offset (1..increment). */
export interface TicketServer {
  pool: Pool
  /** This server's offset, 1..increment. @default its position in `servers` + 1 */
  offset?: number
  /** The database of the ticket tables on this server. @default the source's `database` */
  database?: string
}

/** The servers of a ticket sequence: what {@link TicketServerSource} and {@link installTicketServers} take. */
export interface TicketServersOptions {
  /** The ticket servers, in offset order unless offsets are given. */
  servers: readonly (Pool | TicketServer)[]
  /** The sequence name (`photos` uses table `tickets64_photos`). */
  sequence: string
  /** @default 'tickets' */
  database?: string
  /**
   * Distance between two tickets of one server: the number of servers, at most 65,535. Every
   * server records the increment and offset it was installed with, and refuses a source that
   * asks with others (`ConfigurationError`, nothing issued).
   * @default servers.length
   */
  increment?: number
  /**
   * `true`: use each server's own `@@auto_increment_increment` / `@@auto_increment_offset`
   * (my.cnf) instead of `increment` and the offsets given here; servers whose increments differ
   * or whose offsets collide are refused.
   * @default false
   */
  useServerSettings?: boolean
  /**
   * The longest one call waits for a server, in ms. A server that does not answer in time is
   * treated like one that is down: skipped for `retryAfterMs`, and the next server is asked.
   * @default 2000 (core SOURCE_DEFAULTS.timeoutMs)
   */
  timeoutMs?: number
  /** How long a server that failed is skipped, in ms. @default 1000 (core SOURCE_DEFAULTS.retryAfterMs) */
  retryAfterMs?: number
}

/** Increment and offset of one server. @internal */
export interface TicketSettings {
  increment: number
  offset: number
}

/** One server as the source and the installer use it. @internal */
export interface ServerEntry {
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
  /** For messages: "ticket server 1 (database tickets) of sequence photos". */
  what: string
  /** With `useServerSettings`: what the server recorded, once read. */
  recorded?: TicketSettings
}

/** The options with defaults applied and checked. @internal */
export interface TicketConfig {
  sequence: string
  increment: number
  useServerSettings: boolean
  timeoutMs: number
  retryAfterMs: number
  servers: ServerEntry[]
}

/**
 * @throws ConfigurationError for offsets that do not form 1..increment without repeats, an
 *   increment above 65,535, or the same pool and database given twice.
 * @internal
 */
export function resolveTicketConfig(
  options: TicketServersOptions,
  where = 'TicketServerSource',
  more: readonly string[] = [],
): TicketConfig {
  checkKnownOptions(`${where} options`, options, [...TICKET_OPTIONS, ...more])
  if (!Array.isArray(options.servers) || options.servers.length === 0) {
    throw new ConfigurationError(
      `servers must not be empty: give ${where} a list of mysql2 pools, one per ticket server (or { pool, offset, database } each), got ${describeValue(options.servers)}.`,
    )
  }
  if (options.useServerSettings !== undefined && typeof options.useServerSettings !== 'boolean') {
    throw new InvalidArgumentError(
      `useServerSettings must be true or false, got ${describeValue(options.useServerSettings)}.`,
    )
  }
  const sequence = checkIdentifier('sequence', options.sequence)
  const defaultDatabase = checkIdentifier('database', options.database ?? 'tickets')
  const increment = options.increment ?? options.servers.length
  const table = ticketTable(sequence)
  const servers = options.servers.map((server: unknown, index): ServerEntry => {
    const entry = serverEntry(server, index)
    const database = checkIdentifier('database', entry.database ?? defaultDatabase)
    return {
      pool: entry.pool,
      offset: entry.offset ?? index + 1,
      database,
      downUntil: 0,
      index,
      table: `\`${database}\`.\`${table}\``,
      sql: `SELECT CAST(\`${database}\`.\`next_${sequence}\`(?, ?, ?) AS CHAR) AS v`,
      what: `ticket server ${index} (database ${database}) of sequence ${sequence}`,
    }
  })
  if (!Number.isSafeInteger(increment)) {
    throw new ConfigurationError(
      `increment must be a whole number from the number of servers (${servers.length}) to ${MAX_TICKET_INCREMENT}, got ${describeValue(increment)}.`,
    )
  }
  const offsets = new Set(servers.map((s) => s.offset))
  if (
    increment < servers.length ||
    increment > MAX_TICKET_INCREMENT ||
    offsets.size !== servers.length ||
    [...offsets].some((o) => !Number.isSafeInteger(o) || o < 1 || o > increment)
  ) {
    throw new ConfigurationError(
      `Ticket servers need distinct offsets from 1 to increment (${increment}, at most ${MAX_TICKET_INCREMENT}), one per server.`,
    )
  }
  for (const [i, a] of servers.entries()) {
    if (servers.slice(0, i).some((b) => b.pool === a.pool && b.database === a.database)) {
      throw new ConfigurationError(
        `Ticket server ${i} repeats the pool and database ${a.database} of an earlier server.`,
      )
    }
  }
  for (const { pool } of servers) checkBigNumberConfig(pool, 'TicketServerSource')
  return {
    sequence,
    increment,
    useServerSettings: options.useServerSettings ?? false,
    timeoutMs: readSourceDuration('timeoutMs', options.timeoutMs, { min: 1 }),
    retryAfterMs: readSourceDuration('retryAfterMs', options.retryAfterMs),
    servers,
  }
}

/** The names of {@link TicketServersOptions}. */
const TICKET_OPTIONS = [
  'servers',
  'sequence',
  'database',
  'increment',
  'useServerSettings',
  'timeoutMs',
  'retryAfterMs',
]

/**
 * One entry of `servers`: a pool, or `{ pool, offset?, database? }`.
 * @throws InvalidArgumentError for anything else.
 */
function serverEntry(server: unknown, index: number): TicketServer {
  const candidate = server as Partial<Pool> | null | undefined
  if (typeof candidate?.getConnection === 'function' && typeof candidate.query === 'function') {
    return { pool: server as Pool }
  }
  if (typeof server !== 'object' || server === null || !('pool' in server)) {
    throw new InvalidArgumentError(
      `servers[${index}] must be a mysql2 pool, or { pool, offset, database }, got ${describeValue(server)}.`,
    )
  }
  checkKnownOptions(`servers[${index}]`, server, ['pool', 'offset', 'database'])
  const entry = server as TicketServer
  checkPool(`servers[${index}].pool`, entry.pool)
  return entry
}

/** The recorded increment and offset of a server, for the source. @internal */
export async function readRecorded(server: ServerEntry): Promise<TicketSettings> {
  let rows: unknown
  try {
    ;[rows] = await server.pool.query(
      `SELECT \`server_increment\` AS inc, \`server_offset\` AS off FROM ${server.table} WHERE \`stub\` = 'a'`,
    )
  } catch (error) {
    const errno = driverError(error)?.errno
    if (errno !== 1146 && errno !== 1049 && errno !== 1054) throw error
    throw new ConfigurationError(
      `${server.what} has no ticket table of this version: run installTicketServers.`,
      { cause: error },
    )
  }
  const row = (rows as { inc: unknown; off: unknown }[])[0]
  if (!row) {
    throw new ConfigurationError(`${server.what} has no ticket row: run installTicketServers.`)
  }
  const settings = { increment: Number(row.inc), offset: Number(row.off) }
  if (settings.increment === 0) {
    throw new ConfigurationError(
      `${server.what} is paused by a reconfiguration that did not finish: run installTicketServers({ reconfigure: true }).`,
    )
  }
  return settings
}

export function sameSettings(a: TicketSettings, b: TicketSettings): boolean {
  return a.increment === b.increment && a.offset === b.offset
}

/** The smallest ticket >= floor (and >= 1) of the residue class of `offset` modulo `increment`. @internal */
export function firstTicket(floor: bigint, { increment, offset }: TicketSettings): bigint {
  const from = floor < 1n ? 1n : floor
  const step = BigInt(increment)
  return from + ((((BigInt(offset) - from) % step) + step) % step)
}

/**
 * Throws unless the servers share one increment (1..65,535) and their offsets are distinct and
 * within 1..increment: only then are their residue classes disjoint. @internal
 */
export function checkSettings(
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
