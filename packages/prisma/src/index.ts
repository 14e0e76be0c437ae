export { trustSuppliedIds } from '@shardflake/core'
export { type ShardedIdsClient, type ShardedIdsOptions, shardedIds } from './extension'
export {
  checkModels,
  type ModelMetadata,
  parseShardedId,
  type RelationMetadata,
  type ShardedIdAnnotation,
  type ShardedModels,
} from './metadata'
export {
  type RoutedDelegate,
  type ShardedClients,
  type ShardedClientsOptions,
  type ShardedIdsHost,
  shardedClients,
} from './sharded-clients'
