import { sqlString } from './options'

/**
 * The SQLSTATEs the routines SIGNAL, one per failure, so that a failure is told apart by its
 * SQLSTATE alone (the message is for people). Class `SF` is shardflake's own; SF001-SF009 mean
 * the same as in the PostgreSQL functions (SF003 and SF004 do not occur here), SF020 and up are
 * MySQL's own.
 */
export const SIGNALS = Object.freeze({
  /** The counter is ahead of the clock because the clock went back (behind a time it showed before). */
  CLOCK_BEHIND: 'SF001',
  /** The database holds another sharding (layout or logicalShards) than the install script. */
  SHARDING_MISMATCH: 'SF002',
  /** The layout's time field is used up. */
  EXHAUSTED: 'SF007',
  /** The logical shard moved to another server: the shard map is out of date. */
  MOVED: 'SF005',
  /** A count outside 1 to 1,000,000. */
  COUNT: 'SF020',
  /** `generate_id(shard_key, ...)` called with a key of another shard. */
  WRONG_SHARD: 'SF021',
  /** `shard_for_key` or `generate_id`: the key is NULL, empty or only white space (as in PostgreSQL). */
  MISSING_KEY: 'SF008',
  /** `shard_for_key` or `generate_id`: text over 1024 characters or U+0000 (as in PostgreSQL). */
  INVALID_KEY: 'SF009',
  /** The counter row is missing. */
  MISSING: 'SF022',
  /** More IDs asked of the shard than it makes within maxDriftMs (the clock is fine). */
  OVERLOADED: 'SF006',
  /** A ticket server holds another increment or offset than the caller asked with. */
  TICKET_MISMATCH: 'SF030',
  /** A ticket server is paused by a reconfiguration that did not finish. */
  TICKET_PAUSED: 'SF031',
  /** A ticket server has no ticket row. */
  TICKET_MISSING: 'SF032',
  /** Re-installing a shard that moved away from this server. */
  MOVED_AWAY: 'SF023',
})

/** A SIGNAL statement with a fixed message (at most 128 characters on MySQL). @internal */
export function signal(sqlState: string, message: string): string {
  return `SIGNAL SQLSTATE '${sqlState}' SET MESSAGE_TEXT = ${sqlString(`shardflake: ${message}`.slice(0, 128))}`
}
