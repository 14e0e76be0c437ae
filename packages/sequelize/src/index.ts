export { trustSuppliedIds } from '@shardflake/core'
export {
  type ShardedIdAttribute,
  type ShardedIdRule,
  shardedId,
} from './sharded-id'
export { ShardedIds, type ShardedIdsOptions, shardedIds } from './sharded-ids'
