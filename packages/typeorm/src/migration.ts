import { InvalidArgumentError } from '@shardflake/core'
import type { MigrationInterface, QueryRunner } from 'typeorm'

/**
 * Shard DDL as the SQL generators of `@shardflake/postgres` and `@shardflake/mysql` produce it:
 * the statements that install (`up`) and remove (`down`) schemas, sequences and `next_id()`
 * routines. Each string is sent as one statement, in order (a routine body is one statement).
 */
export interface ShardDdl {
  readonly up: readonly string[] | string
  readonly down: readonly string[] | string
}

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
 * Turns shard DDL into a TypeORM migration class. TypeORM orders migrations by the 13-digit
 * timestamp the name ends with, so the name must end with one.
 *
 * @example
 * ```ts
 * import { shardSchemaSql } from '@shardflake/postgres'   // any { up, down } of SQL strings
 *
 * export const ShardflakeShards1732250000000 = shardMigration(
 *   'ShardflakeShards1732250000000',
 *   { up: ['CREATE SCHEMA shard_0001', ...], down: ['DROP SCHEMA shard_0001 CASCADE'] },
 * )
 * new DataSource({ ..., migrations: [ShardflakeShards1732250000000] })
 * ```
 */
export function shardMigration(
  name: string,
  ddl: ShardDdl,
  options: ShardMigrationOptions = {},
): ShardMigrationClass {
  if (!TIMESTAMPED.test(name)) {
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

function statements(value: readonly string[] | string, which: string): readonly string[] {
  const list = typeof value === 'string' ? [value] : [...value]
  if (list.some((sql) => typeof sql !== 'string')) {
    throw new InvalidArgumentError(`Shard DDL '${which}' must be SQL strings.`)
  }
  return list.filter((sql) => sql.trim() !== '')
}
