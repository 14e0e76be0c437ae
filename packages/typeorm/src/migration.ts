import { checkKnownOptions, type Ddl, InvalidArgumentError } from '@shardflake/core'
import type { MigrationInterface, QueryRunner } from 'typeorm'

/** A migration class TypeORM can list in `migrations` and instantiate. */
export type ShardMigrationClass = new () => MigrationInterface

/** What {@link shardMigration} takes besides the DDL. */
export interface ShardMigrationOptions {
  /**
   * Run the migration in a transaction of its own (`true`), or without one (`false`: for DDL
   * that must not run in a transaction). `undefined` follows the DataSource's
   * `migrationsTransactionMode`.
   * @default undefined
   */
  readonly transaction?: boolean
}

const TIMESTAMPED = /\d{13}$/

/**
 * Turns shard DDL into a TypeORM migration class: `up` installs, `down` removes. Each side is a
 * `Ddl` as the SQL generators of `@shardflake/postgres` and `@shardflake/mysql` return it (its
 * `statements` are sent one by one, a routine body being one statement), or SQL strings. TypeORM
 * orders migrations by the 13-digit timestamp the name ends with, so the name must end with one.
 *
 * @throws InvalidArgumentError for a name without the timestamp, DDL that is not SQL, or an unknown
 *   option.
 * @example
 * ```ts
 * export const ShardflakeShards1732250000000 = shardMigration('ShardflakeShards1732250000000', {
 *   up: postgresSql({ sharding, shards: '0-15' }),
 *   down: ['DROP SCHEMA shard_0 CASCADE'],
 * })
 * new DataSource({ type: 'postgres', url, migrations: [ShardflakeShards1732250000000] })
 * ```
 */
export function shardMigration(
  name: string,
  ddl: { readonly up: MigrationSql; readonly down: MigrationSql },
  options: ShardMigrationOptions = {},
): ShardMigrationClass {
  checkKnownOptions('shardMigration() options', options, ['transaction'])
  checkKnownOptions('shardMigration() DDL', ddl, ['up', 'down'])
  if (typeof name !== 'string' || !TIMESTAMPED.test(name)) {
    throw new InvalidArgumentError(
      `Migration name ${JSON.stringify(name)} must end with a 13-digit timestamp (Date.now()), e.g. ShardflakeShards${Date.now()}: TypeORM orders migrations by it.`,
    )
  }
  const up = statements(ddl.up, 'up')
  const down = statements(ddl.down, 'down')
  const run = async (queryRunner: QueryRunner, list: readonly string[]) => {
    for (const sql of list) await queryRunner.query(sql)
  }
  const migration = class implements MigrationInterface {
    readonly name = name
    readonly transaction = options.transaction
    async up(queryRunner: QueryRunner): Promise<void> {
      await run(queryRunner, up)
    }
    async down(queryRunner: QueryRunner): Promise<void> {
      await run(queryRunner, down)
    }
  }
  Object.defineProperty(migration, 'name', { value: name })
  return migration
}

/** One side of a migration: a `Ddl`, SQL statements, or one SQL string. */
export type MigrationSql = Ddl | readonly string[] | string

function statements(value: MigrationSql, which: string): readonly string[] {
  const list =
    typeof value === 'string'
      ? [value]
      : Array.isArray(value)
        ? [...(value as readonly string[])]
        : [...((value as Ddl)?.statements ?? [undefined])]
  if (list.some((sql) => typeof sql !== 'string')) {
    throw new InvalidArgumentError(`Shard DDL '${which}' must be SQL strings.`)
  }
  return list.filter((sql) => sql.trim() !== '')
}
