import { ConfigurationError, type IdSource } from '@shardflake/core'

/**
 * The key of a new row whose ID comes from an asynchronous source: the plugin puts it in the
 * query (so `.compile()` shows it among the parameters), and the dialect from
 * `ShardedIdsPlugin.dialect()` replaces it with an ID of its shard when the query runs, one
 * `nextIds` call per shard. Sent to a database unreplaced, it fails the query before anything is
 * written.
 */
export class PendingId {
  readonly #source: IdSource

  /** @param shard the logical shard the row's rule gives */
  constructor(
    readonly shard: number,
    source: IdSource,
  ) {
    this.#source = source
  }

  /**
   * The source a pending ID is to be drawn from.
   * @internal
   */
  static sourceOf(pending: PendingId): IdSource {
    return pending.#source
  }

  /** node-postgres calls this for a parameter: refuse, the ID was never filled. */
  toPostgres(): never {
    throw notFilled()
  }

  /** mysql2 calls this for a parameter: refuse, the ID was never filled. */
  toSqlString(): never {
    throw notFilled()
  }

  /** Refused as well: a pending ID is not a value to serialize. */
  toJSON(): never {
    throw notFilled()
  }

  toString(): string {
    return `PendingId(shard ${this.shard})`
  }
}

function notFilled(): ConfigurationError {
  return new ConfigurationError(
    'A query reached the database with a pending shardflake ID: its source is asynchronous, and the Kysely instance that ran it does not use the dialect from shardedIds().dialect(). Create it with new Kysely({ dialect: ids.dialect(new PostgresDialect(...)), plugins: [ids] }). Nothing was written.',
  )
}
