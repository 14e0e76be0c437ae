/**
 * Installs shardflake's database side (per-shard schemas and `next_id()` on PostgreSQL, routines
 * on MySQL/MariaDB) through MikroORM's migrator.
 *
 * @module
 */
import { Migration } from '@mikro-orm/migrations'

/** SQL to apply and to revert: a script, or statements run one by one. */
export interface ShardDdl {
  up: string | readonly string[]
  /** @default nothing to revert */
  down?: string | readonly string[]
}

/** A migration class, as `migrationsList` and migration files export it. */
export type ShardMigrationClass = new (
  ...args: ConstructorParameters<typeof Migration>
) => Migration

/**
 * A MikroORM migration that runs shard DDL: the SQL strings `@shardflake/postgres` and
 * `@shardflake/mysql` generate, or your own `{ up, down }`. Give a function to build the SQL when
 * the migration runs instead of when the file is loaded.
 *
 * On MySQL/MariaDB, give one routine per statement (no `DELIMITER` lines): each string is sent as
 * one query. On PostgreSQL a whole script (with `$$` bodies) may be one string.
 *
 * @example A migration file
 * ```ts
 * import { postgresSql } from '@shardflake/postgres'
 * import { shardMigration } from '@shardflake/mikro-orm/migrations'
 *
 * export class Migration20260101000000Shards extends shardMigration(() => ({
 *   up: postgresSql({ shards: [0, 1, 2, 3] }),
 *   down: ['DROP SCHEMA IF EXISTS shard_0 CASCADE', 'DROP SCHEMA IF EXISTS shard_1 CASCADE'],
 * })) {}
 * ```
 */
export function shardMigration(ddl: ShardDdl | (() => ShardDdl)): ShardMigrationClass {
  const statements = (side: 'up' | 'down'): readonly string[] => {
    const sql = (typeof ddl === 'function' ? ddl() : ddl)[side] ?? []
    return typeof sql === 'string' ? [sql] : sql
  }
  return class ShardMigration extends Migration {
    override up(): void {
      for (const sql of statements('up')) this.addSql(sql)
    }

    override down(): void {
      for (const sql of statements('down')) this.addSql(sql)
    }
  }
}
