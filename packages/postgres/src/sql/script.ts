import { type Ddl, readShardList, type ShardList } from '@shardflake/core'
import { commonScript } from './common'
import { asDdl } from './ddl'
import { type PostgresSqlOptions, resolveSqlOptions } from './options'
import { shardScript } from './shard'

/**
 * The whole script for a layout and a set of logical shards: the common objects, then each shard.
 * Pure: nothing is executed. Run it in one transaction (a migration file, `psql -1 -f`).
 *
 * @example
 * ```ts
 * import { writeFileSync } from 'node:fs'
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { postgresSql } from '@shardflake/postgres'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * writeFileSync('migrations/001_ids.sql', postgresSql({ sharding, shards: '0-99' }).script)
 * ```
 */
export function postgresSql(
  options: PostgresSqlOptions & {
    shards: ShardList
  },
): Ddl {
  const o = resolveSqlOptions(options, { where: 'postgresSql options', more: ['shards'] })
  const shards = readShardList(options.shards, o.sharding)
  return asDdl([commonScript(o), ...shards.map((shard) => shardScript(o, shard))].join('\n'))
}
