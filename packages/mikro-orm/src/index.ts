export { shardedId } from './define-entity'
export { ReservedSource, type ReserveOptions } from './reserve'
export type {
  ShardedIdOptions,
  ShardedIdRule,
  ShardedIdTypeOptions,
} from './sharded-id'
export {
  assignShardedIds,
  ShardedIdSubscriber,
  type ShardedIdsOptions,
  shardedIds,
} from './subscriber'
