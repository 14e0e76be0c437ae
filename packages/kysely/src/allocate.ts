import {
  allocateAscending,
  allocateIds,
  type IdRequestContext,
  type IdSource,
  type SyncIdSource,
} from '@shardflake/core'

/**
 * One ID for each entry of `shards`. Several rows get IDs ascending in row order when the source
 * can (in-process, leased) and its time window allows, so a multi-row INSERT appends to the
 * primary key's B-tree as auto-increment keys do; otherwise one `nextIds` per shard (`nextId`
 * for a shard that needs one, which a prefetching source serves from its buffer).
 */
export function allocate(
  source: SyncIdSource,
  shards: readonly number[],
  context?: IdRequestContext,
): bigint[]
export function allocate(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
): bigint[] | Promise<bigint[]>
export function allocate(
  source: IdSource,
  shards: readonly number[],
  context?: IdRequestContext,
): bigint[] | Promise<bigint[]> {
  return shards.length > 1
    ? allocateAscending(source, shards, context, { singleNextId: true })
    : allocateIds(source, shards, context, { singleNextId: true })
}
