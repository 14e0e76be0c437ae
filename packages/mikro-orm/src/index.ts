export { MisplacedIdError, ShardKeyChangedError, trustSuppliedIds } from '@shardflake/core'
export { assignShardedIds } from './assign'
export { shardedId } from './define-entity'
export type {
  IdType,
  ShardedIdOptions,
  ShardedIdRule,
  ShardedIdTypeOptions,
} from './sharded-id'
export { ShardedOrms, type ShardTarget, shardedOrms } from './sharded-orms'
export { ShardedIdSubscriber, type ShardedIdsOptions, shardedIds } from './subscriber'
