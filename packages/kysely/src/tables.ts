import {
  ConfigurationError,
  checkKnownOptions,
  checkShardColumn,
  checkShardRule,
  describeShardRule,
  InvalidArgumentError,
  InvalidShardRuleError,
  type Sharding,
  type ShardRule,
} from '@shardflake/core'

/**
 * The sharded key of one table and where its rows go: a shard rule, with the same names and
 * meaning as in every shardflake adapter, over the table's columns as your queries name them.
 *
 * - `{ shardBy: 'email' }`: a plain key (a tenant id, an email): integers and digit strings
 *   `mod logicalShards`, other strings hashed. Never a column holding another sharded row's ID.
 * - `{ sameShardAs: 'author_id' }`: the foreign-key column holding a sharded parent's ID; the row
 *   goes to the parent's shard, read from that ID.
 * - `{ shard: 5 }`: a fixed logical shard.
 * - A function instead of a column name gets the row's values (`shardBy: (row) => row.tenant_id`).
 * - Any of them may add `shardColumn: 'lshard'`: an integer column the plugin fills with the
 *   logical shard of each new row's ID, for engines that route by a column value (Citus, Vitess,
 *   PgDog).
 *
 * @example
 * ```ts
 * import type { ShardedTable } from '@shardflake/kysely'
 *
 * const posts: ShardedTable = { sameShardAs: 'author_id' } // key column `id`
 * const events: ShardedTable = { column: 'event_id', shardBy: 'tenant_id' }
 * ```
 */
export type ShardedTable<Row = Record<string, unknown>> = ShardRule<Row> & {
  /**
   * The key column the plugin fills: a `BIGINT` primary key the database does not generate.
   * @default 'id'
   */
  readonly column?: keyof Row & string
}

/** A declared table, checked. */
export interface TableSpec {
  /** As declared: `posts`, or `schema.posts`. */
  readonly name: string
  /** The key column. */
  readonly column: string
  readonly rule: ShardRule<Record<string, unknown>>
  /** The table and its rule, for messages: `posts (sameShardAs 'author_id')`. */
  readonly label: string
}

const TABLE_OPTIONS = ['column', 'shardBy', 'sameShardAs', 'shard', 'stringKeys', 'shardColumn']

/**
 * Reads and checks the `tables` option, before any row is written: every rule is well-formed
 * (`InvalidShardRuleError`), names a column other than the key, and a fixed shard is one of the
 * logical shards (`ShardOutOfRangeError`).
 */
export function readTables(
  tables: unknown,
  sharding: Sharding | undefined,
): Map<string, TableSpec> {
  if (typeof tables !== 'object' || tables === null || Array.isArray(tables)) {
    throw new InvalidArgumentError(
      `shardedIds() needs tables: an object of table name to shard rule, e.g. { tables: { posts: { sameShardAs: 'author_id' } } }.`,
    )
  }
  const specs = new Map<string, TableSpec>()
  for (const [name, spec] of Object.entries(tables)) {
    if (spec === undefined) continue
    checkKnownOptions(`shardedIds() table ${JSON.stringify(name)}`, spec, TABLE_OPTIONS)
    const rule = checkShardRule(spec, `table ${name}`) as ShardRule<Record<string, unknown>>
    const column = (spec as ShardedTable).column ?? 'id'
    if (typeof column !== 'string' || column === '') {
      throw new InvalidArgumentError(
        `shardedIds() table ${JSON.stringify(name)}: column must name the key column, got ${JSON.stringify(column)}.`,
      )
    }
    checkShardColumn(rule, `table ${name}`, { idField: column })
    if (rule.shardColumn !== undefined && !sharding) {
      throw new ConfigurationError(
        `shardedIds() table ${JSON.stringify(name)} has the shard column '${rule.shardColumn}', but the source makes plain IDs (ticket servers) that carry no shard. Use a source with a layout, or drop shardColumn.`,
      )
    }
    const label = `${name} (${describeShardRule(rule as ShardRule<never>)})`
    if ('shard' in rule) {
      sharding?.checkShard(rule.shard, `${name} ({ shard: ${rule.shard} })`)
    } else {
      const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
      if (field === column) {
        throw new InvalidShardRuleError(
          `${label}: '${column}' is the key column itself, which the plugin fills. Name the column the row's shard comes from: its own key (shardBy) or its parent's ID (sameShardAs).`,
        )
      }
    }
    specs.set(name, { name, column, rule, label })
  }
  if (specs.size === 0) {
    throw new InvalidArgumentError(
      `shardedIds() has no tables: declare each table with a sharded key, e.g. { tables: { posts: { sameShardAs: 'author_id' } } }.`,
    )
  }
  return specs
}
