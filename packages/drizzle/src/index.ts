export { trustSuppliedIds } from '@shardflake/core'
export { type DefaultFnColumn, type ShardedIdRule, shardedId } from './sharded-id'
export { ShardedIds, type ShardedIdsOptions, shardedIds } from './sharded-ids'
