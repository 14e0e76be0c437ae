export * from './errors'
export {
  type AllocateOptions,
  allocateIds,
  checkCount,
  type IdRequestContext,
  type IdSource,
  isSyncSource,
  logicalShardsOf,
  resolveLogicalShards,
  type SyncIdSource,
} from './id-source'
export { type IdInput, toBigInt, toSigned64, toUnsigned64 } from './id-value'
export { checkIdentifier } from './identifier'
export {
  InProcessSource,
  type InProcessSourceOptions,
  type ShardSelection,
} from './in-process-source'
export { jsonReplacer, stringifyIds } from './json'
export {
  type DecodedId,
  defineLayout,
  type FieldName,
  type IdParts,
  type IdRange,
  Layout,
  type LayoutDescription,
  type LayoutOptions,
} from './layout'
export {
  PrefetchBuffers,
  type PrefetchOptions,
  PrefetchSource,
} from './prefetch-source'
export { discord, instagram, presets, sonyflake, twitter } from './presets'
export { RoutedSource } from './routed-source'
export {
  fnv1a32,
  hashShard,
  integerShard,
  type ResolveShardOptions,
  resolveShard,
  type ShardKey,
  type ShardRule,
  type StringKeyMode,
  shardForKey,
} from './shard-key'
export {
  formatShardList,
  parseShardList,
  readShardList,
  type ShardList,
  ShardMap,
  type ShardRange,
} from './shard-map'
