import {
  checkKnownOptions,
  type Ddl,
  describeValue,
  InvalidArgumentError,
  toDdl,
} from '@shardflake/core'
import { checkIdentifier, quoteIdentifier } from '../identifiers'
import type { MysqlDialect } from '../sql/options'
import { MAX_BATCH, STRICT_MODE_BEGIN, STRICT_MODE_END } from '../sql/shard-parts'
import { SIGNALS, signal } from '../sql/signals'

/** Engine of a ticket table. */
export type TicketEngine = 'InnoDB' | 'MyISAM' | 'Aria'

/** What {@link ticketServerSql} takes. */
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

/** The ticket table of a sequence. @internal */
export function ticketTable(sequence: string): string {
  return `tickets64_${checkIdentifier('sequence', sequence)}`
}

/**
 * The SQL of one ticket server, as in "Ticket Servers: Distributed Unique Primary Keys on the
 * Cheap": per sequence a `tickets64_<name>` table whose one row holds the server's next ticket
 * **and the increment and offset it was installed with**, and a function
 * `next_<name>(n, increment, offset)` that hands out `n` tickets with ONE single-row
 * `UPDATE ... SET id = LAST_INSERT_ID(id + increment * n)`, but only when the caller's increment
 * and offset are the recorded ones (else SQLSTATE `SF030`, nothing issued). The row itself is
 * written by {@link installTicketServers}, which picks its first ticket.
 *
 * Not `REPLACE INTO Tickets64 (stub) VALUES ('a')`: on InnoDB a REPLACE is a delete plus an
 * insert, and concurrent callers deadlock; updating one row by its primary key takes one record
 * lock, so callers queue and never deadlock.
 *
 * @example
 * ```ts
 * import { ticketServerSql } from '@shardflake/mysql'
 *
 * const ddl = ticketServerSql({ sequences: ['photos'] })
 * ddl.statements // for a driver; ddl.script for the mariadb client
 * ```
 */
export function ticketServerSql(options: TicketSqlOptions): Ddl {
  checkKnownOptions('ticketServerSql options', options, [
    'sequences',
    'database',
    'dialect',
    'engine',
  ])
  if (!Array.isArray(options.sequences)) {
    throw new InvalidArgumentError("sequences must be a list of sequence names, e.g. ['photos'].")
  }
  const db = quoteIdentifier('database', options.database ?? 'tickets')
  const dialect = options.dialect ?? 'mariadb'
  if (dialect !== 'mariadb' && dialect !== 'mysql8') {
    throw new InvalidArgumentError(
      `dialect must be 'mariadb' or 'mysql8', got ${describeValue(dialect)}.`,
    )
  }
  const engine = options.engine ?? 'InnoDB'
  if (!['InnoDB', 'MyISAM', 'Aria'].includes(engine)) {
    throw new InvalidArgumentError('engine must be InnoDB, MyISAM or Aria.')
  }
  if (options.sequences.length === 0) throw new InvalidArgumentError('sequences must not be empty.')
  const statements = [...STRICT_MODE_BEGIN, `CREATE DATABASE IF NOT EXISTS ${db}`]
  for (const name of options.sequences) {
    const table = quoteIdentifier('table', ticketTable(name))
    const fn = quoteIdentifier('function', `next_${name}`)
    const head =
      dialect === 'mariadb'
        ? [`CREATE OR REPLACE FUNCTION ${db}.${fn}`]
        : [`DROP FUNCTION IF EXISTS ${db}.${fn}`, `CREATE FUNCTION ${db}.${fn}`]
    head[head.length - 1] += `(n INT, step INT, start INT) RETURNS BIGINT UNSIGNED
  NOT DETERMINISTIC MODIFIES SQL DATA
  COMMENT 'shardflake ticket server: n tickets in one single-row UPDATE, returns the first'
BEGIN
  DECLARE recorded_increment BIGINT;
  DECLARE recorded_offset BIGINT;
  DECLARE message VARCHAR(128);
  IF n IS NULL OR n < 1 OR n > ${MAX_BATCH} THEN
    ${signal(SIGNALS.COUNT, `n must be from 1 to ${MAX_BATCH}`)};
  END IF;
  UPDATE ${db}.${table} SET \`id\` = LAST_INSERT_ID(\`id\` + \`server_increment\` * n)
   WHERE \`stub\` = 'a' AND \`server_increment\` = step AND \`server_offset\` = start;
  IF ROW_COUNT() = 1 THEN
    RETURN LAST_INSERT_ID() - step * n;
  END IF;
  SET recorded_increment = (SELECT \`server_increment\` FROM ${db}.${table} WHERE \`stub\` = 'a');
  SET recorded_offset = (SELECT \`server_offset\` FROM ${db}.${table} WHERE \`stub\` = 'a');
  IF recorded_increment IS NULL THEN
    ${signal(SIGNALS.TICKET_MISSING, 'no ticket row')};
  END IF;
  IF recorded_increment = 0 THEN
    ${signal(SIGNALS.TICKET_PAUSED, 'a reconfiguration is not finished')};
  END IF;
  SET message = CONCAT('shardflake: this server hands out tickets with increment ', recorded_increment, ', offset ', recorded_offset);
  SIGNAL SQLSTATE '${SIGNALS.TICKET_MISMATCH}' SET MESSAGE_TEXT = message;
END`
    statements.push(
      `CREATE TABLE IF NOT EXISTS ${db}.${table} (\n  \`stub\` CHAR(1) NOT NULL PRIMARY KEY,\n  \`id\` BIGINT UNSIGNED NOT NULL COMMENT 'next ticket of this server',\n  \`server_increment\` INT UNSIGNED NOT NULL COMMENT 'increment it was installed with (0: paused)',\n  \`server_offset\` INT UNSIGNED NOT NULL COMMENT 'offset it was installed with, 1..increment'\n) ENGINE=${engine}`,
      ...head,
    )
  }
  return toDdl([...statements, ...STRICT_MODE_END], { delimiter: '$$' })
}
