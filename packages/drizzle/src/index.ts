export { trustSuppliedIds } from '@shardflake/core'
export {
  ShardedDatabases,
  type ShardTarget,
  shardedDatabases,
  type TransactionConfigOf,
  type TransactionOf,
} from './sharded-databases'
export { type DefaultFnColumn, type ShardedIdRule, shardedId } from './sharded-id'
export { ShardedIds, type ShardedIdsOptions, shardedIds } from './sharded-ids'
