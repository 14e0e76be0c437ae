/**
 * Installs shardflake's database side (per-shard schemas and `next_id()` on PostgreSQL, routines
 * on MySQL/MariaDB) through MikroORM's migrator.
 *
 * @module
 */
import { Migration } from '@mikro-orm/migrations'
import { checkKnownOptions, type Ddl } from '@shardflake/core'

/**
 * One side of a migration: a `Ddl` from a shardflake SQL generator (its statements run one by
 * one), a script, or statements.
 */
export type MigrationSql = Ddl | string | readonly string[]

/** SQL to apply and to revert. */
export interface ShardDdl {
  up: MigrationSql
  /** @default nothing to revert */
  down?: MigrationSql
}

/**
 * A migration that runs the {@link ShardDdl} of its class's static `ddl`. Extend it directly, or
 * through {@link shardMigration}.
 *
 * @example
 * ```ts
 * import { ShardMigration } from '@shardflake/mikro-orm/migrations'
 *
 * export class Migration20260101000000Shards extends ShardMigration {
 *   static override ddl = { up: ['CREATE SCHEMA shard_0', '...'], down: ['DROP SCHEMA shard_0 CASCADE'] }
 * }
 * ```
 */
export class ShardMigration extends Migration {
  /** The SQL, or a function building it when the migration runs. */
  static ddl: ShardDdl | (() => ShardDdl) = { up: [] }

  override up(): void {
    for (const sql of this.statements('up')) this.addSql(sql)
  }

  override down(): void {
    for (const sql of this.statements('down')) this.addSql(sql)
  }

  private statements(side: 'up' | 'down'): readonly string[] {
    const { ddl } = this.constructor as typeof ShardMigration
    const both = typeof ddl === 'function' ? ddl() : ddl
    checkKnownOptions('The shard migration DDL', both, ['up', 'down'])
    const sql = both[side] ?? []
    if (typeof sql === 'string') return [sql]
    return 'statements' in sql ? sql.statements : sql
  }
}

/**
 * A MikroORM migration class that runs shard DDL: the `Ddl` that `postgresSql()` and `mysqlSql()`
 * return, or your own `{ up, down }`. Give a function to build the SQL when the migration runs
 * instead of when the file is loaded. A misspelt side (`dwon`) is refused with
 * `InvalidArgumentError`, naming the closest.
 *
 * A `Ddl` runs statement by statement. On MySQL/MariaDB, give your own SQL as one statement per
 * string (no `DELIMITER` lines); on PostgreSQL a whole script (with `$$` bodies) may be one string.
 *
 * @example A migration file
 * ```ts
 * import { postgresSql } from '@shardflake/postgres'
 * import { shardMigration } from '@shardflake/mikro-orm/migrations'
 * import type { Sharding } from '@shardflake/core'
 * declare const sharding: Sharding // the application's defineSharding({ layout, logicalShards })
 *
 * export class Migration20260101000000Shards extends shardMigration(() => ({
 *   up: postgresSql({ sharding, shards: '0-63' }),
 *   // one DROP SCHEMA shard_<n> CASCADE per shard, then the common schema
 *   down: ['DROP SCHEMA shard_0 CASCADE', 'DROP SCHEMA shardflake CASCADE'],
 * })) {}
 * ```
 */
export function shardMigration(ddl: ShardDdl | (() => ShardDdl)): typeof ShardMigration {
  if (typeof ddl !== 'function') checkKnownOptions('shardMigration() DDL', ddl, ['up', 'down'])
  return class extends ShardMigration {
    static override ddl = ddl
  }
}
