export { trustSuppliedIds } from '@shardflake/core'
export {
  type MigrationSql,
  type ShardMigrationClass,
  type ShardMigrationOptions,
  shardMigration,
} from './migration'
export {
  ShardedDataSources,
  type ShardTarget,
  shardedDataSources,
} from './sharded-data-sources'
export {
  registerShardedId,
  ShardedId,
  type ShardedIdColumnOptions,
  type ShardedIdOptions,
  type ShardedIdRule,
  shardedIdColumn,
} from './sharded-id'
export { type ShardedIdsOptions, shardedIds } from './sharded-ids'
export type { ShardedIdSubscriber } from './subscriber'
