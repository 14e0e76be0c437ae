import { ConfigurationError, type Sharding } from '@shardflake/core'
import { shardSchemaName } from './identifiers'
import type { RunQuery } from './server-call'
import { recordedSharding } from './shard-state'

/** What the first use of a shard database found there. @internal */
export interface ShardCheck {
  /** The counter table's engine, when information_schema knows it. */
  engine: string | undefined
  /** True unless the engine is known to be non-transactional (`ENGINES.TRANSACTIONS = 'NO'`). */
  transactional: boolean
}

/**
 * Reads a shard database's recorded sharding and counter engine in one statement and compares
 * the sharding with the source's.
 * @throws ConfigurationError when the shard records no sharding (not installed, or by an earlier
 *   version); the message names `logicalShards`.
 * @throws ShardingMismatchError when it records another layout or logicalShards.
 * @internal
 */
export async function readShardCheck(
  run: RunQuery,
  sharding: Sharding,
  shard: number,
  prefix: string,
): Promise<ShardCheck> {
  const database = shardSchemaName(shard, prefix)
  const meta = (name: string) =>
    `(SELECT \`value\` FROM \`${database}\`.\`sf_meta\` WHERE \`name\` = '${name}') AS ${name}`
  const counter = `FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_NAME = 'sf_counter'`
  const rows = await run(
    `SELECT ${meta('layout')}, ${meta('logical_shards')}, (SELECT ENGINE ${counter}) AS engine, (SELECT TRANSACTIONS FROM information_schema.ENGINES WHERE ENGINE = (SELECT ENGINE ${counter})) AS transactions`,
    [database, database],
  )
  const row = rows[0] ?? {}
  const recorded = recordedSharding(row.layout, row.logical_shards)
  if (!recorded) {
    throw new ConfigurationError(
      `Logical shard ${shard} (database ${database}) records no sharding (layout and logicalShards in ${database}.sf_meta): it was not installed by installMysql, or by an earlier version. Run installMysql(pool, { sharding, shards }) there with the application's sharding.`,
    )
  }
  sharding.checkSame(recorded, `database ${database}`)
  const engine = typeof row.engine === 'string' ? row.engine : undefined
  return { engine, transactional: row.transactions !== 'NO' }
}
