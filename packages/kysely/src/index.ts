export { trustSuppliedIds } from '@shardflake/core'
export { PendingId } from './pending-id'
export type { ShardedId } from './sharded-id'
export {
  type AnyDatabase,
  type Assigned,
  type ShardedIdsOptions,
  ShardedIdsPlugin,
  type ShardedTables,
  shardedIds,
} from './sharded-ids'
export {
  type RoutedTransactionBuilder,
  ShardedKysely,
  type ShardTarget,
  shardedKysely,
} from './sharded-kysely'
export type { ShardedTable } from './tables'
