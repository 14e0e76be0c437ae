export {
  checkServedShard,
  closeWithin,
  contextQueryRule,
  type DatabaseSourceOptions,
  OpenedPools,
  OpenSockets,
  type PoolShutdown,
  RunningCalls,
  type SourceDatabases,
  type TrackedSocket,
  toShardMap,
} from './database-source'
export { type Ddl, toDdl } from './ddl'
export { type DeadlineOptions, throwIfCancelled, withDeadline } from './deadline'
export * from './errors'
export {
  Failover,
  type FailoverHandlers,
  type FailoverOptions,
  type FailoverServer,
} from './failover'
export type { FanOutOptions, FanOutRun } from './fan-out'
export { HomesSource, type HomesSourceOptions } from './homes-source'
export {
  type AllocateAscendingOptions,
  type AllocateOptions,
  type AscendingIdSource,
  allocateAscending,
  allocateIds,
  checkContext,
  checkCount,
  checkSignal,
  type IdRequestContext,
  type IdSource,
  isAscendingSource,
  isSyncSource,
  MAX_IDS_PER_CALL,
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
export { checkKnownOptions, describeValue } from './known-options'
export { type DecodedId, defineLayout, type IdParts, type IdRange, Layout } from './layout'
export {
  type FieldName,
  type LayoutDescription,
  type LayoutOptions,
  parseInstant,
} from './layout-options'
export {
  allWorkersHeld,
  LEASE_DEFAULTS,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRegistryOptions,
  type LeaseRequest,
  leaseLost,
  lowerWhileHeld,
  maxTtlMismatch,
  type RegistrySettings,
  RegistrySetup,
  readRegistryOptions,
  registryBehind,
  registryCall,
  registryWaiting,
  ttlAboveMax,
  type WorkerLease,
} from './lease-registry'
export { LeasedSource, type LeasedSourceOptions } from './leased-source'
export { MemoryLeaseRegistry, type MemoryLeaseRegistryOptions } from './memory-lease-registry'
export {
  abortShardHomesMove,
  deleteMovedRows,
  type MovedTable,
  type MovedTableReport,
  type MoveShardHomesOptions,
  moveShardHomes,
  type RowMoveProgress,
  type RowRange,
  type RowStore,
  type ShardHomesMoveResult,
  type ShardRowsOptions,
  type StoredRow,
} from './move-shard-homes'
export {
  checkMoveEnds,
  type FencedShard,
  type MovedShard,
  type MoveProgress,
  type MoveShardsOptions,
  type MoveSteps,
  moveShards,
} from './move-shards'
export {
  PrefetchBuffers,
  type PrefetchOptions,
  PrefetchSource,
} from './prefetch-source'
export { discord, instagram, presets, sonyflake, twitter } from './presets'
export { RoutedSource } from './routed-source'
export {
  checkShardColumn,
  checkShardColumnChange,
  fillShardColumn,
  setShardColumn,
  shardColumnOf,
} from './shard-column'
export {
  type CreatedDirectory,
  checkDirectoryEntries,
  checkExpectedVersion,
  type DirectoryEntry,
  type DirectorySnapshot,
  directoryChanged,
  HOMES_DEFAULTS,
  type HomeState,
  readMaxStaleMs,
  type ShardDirectory,
  StaticDirectory,
  toDirectorySnapshot,
} from './shard-directory'
export {
  ShardHomes,
  type ShardHomesOptions,
  type WriteGroup,
  type WriteHome,
} from './shard-homes'
export {
  fnv1a32,
  hashShard,
  integerShard,
  MAX_KEY_LENGTH,
  type ShardKey,
  type StringKeyMode,
  shardForKey,
} from './shard-key'
export {
  distinctShards,
  formatShardList,
  MAX_LISTED_SHARDS,
  parseShardRanges,
  readShardList,
  type ShardList,
  ShardMap,
  type ShardRange,
} from './shard-map'
export {
  checkShardRule,
  defineSharding,
  describeShardRule,
  requireSharding,
  type ShardColumnOption,
  Sharding,
  type ShardingDescription,
  type ShardingOptions,
  type ShardRule,
  shardByOnShardedIdError,
} from './sharding'
export {
  MAX_DURATION_MS,
  readDuration,
  readInteger,
  readSourceDuration,
  SOURCE_DEFAULTS,
} from './source-options'
export {
  checkKeyChange,
  checkSuppliedId,
  suppliedIdsTrusted,
  trustSuppliedIds,
} from './supplied-ids'
export { workerFromEnvironment } from './worker-from-environment'
