export { shardedId } from './define-entity'
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
