export {
  type ShardDdl,
  type ShardMigrationClass,
  type ShardMigrationOptions,
  shardMigration,
} from './migration'
export {
  registerShardedId,
  ShardedId,
  type ShardedIdColumnOptions,
  type ShardedIdOptions,
  type ShardedIdRule,
  shardedIdColumn,
} from './sharded-id'
export {
  bigintTransformer,
  checkLossless,
  ShardedIdSubscriber,
  type ShardedIdsOptions,
  useShardedIds,
} from './subscriber'
