export { trustSuppliedIds } from '@shardflake/core'
export {
  type ShardedIdAttribute,
  type ShardedIdRule,
  shardedId,
} from './sharded-id'
export { ShardedIds, type ShardedIdsOptions, shardedIds } from './sharded-ids'
export {
  type ModelName,
  ShardedSequelize,
  type ShardTarget,
  shardedSequelize,
} from './sharded-sequelize'
