import {
  ConfigurationError,
  readShardList,
  type Sharding,
  ShardMap,
  type ShardRange,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'

/** A server of a `MysqlSource`: a mysql2 pool you own, or a URL the source opens and closes. */
export type MysqlTarget = Pool | string

/** Where a `MysqlSource`'s logical shards live (its `databases` option). */
export type MysqlDatabases =
  | MysqlTarget
  | readonly ShardRange<MysqlTarget>[]
  | ShardMap<MysqlTarget>

/**
 * The shard map of `databases` (and `shards`, with one server).
 * @throws ShardingMismatchError for a ShardMap of another sharding.
 * @throws ConfigurationError for anything else than a pool, a URL, ranges or a ShardMap.
 * @internal
 */
export function toShardMap(
  sharding: Sharding,
  databases: MysqlDatabases,
  shards: 'all' | readonly number[] | string | { from: number; to: number } | undefined,
): ShardMap<MysqlTarget> {
  if (databases instanceof ShardMap) {
    sharding.checkSame(databases.sharding, 'The shard map given as databases')
    return databases
  }
  if (Array.isArray(databases)) {
    return new ShardMap(sharding, databases as readonly ShardRange<MysqlTarget>[])
  }
  if (typeof databases === 'string' || (typeof databases === 'object' && databases !== null)) {
    const target = databases as MysqlTarget
    if (shards === undefined || shards === 'all') return ShardMap.single(sharding, target)
    if (typeof shards === 'object' && !Array.isArray(shards)) {
      const { from, to } = shards as { from: number; to: number }
      return new ShardMap(sharding, [{ from, to, target }])
    }
    const expanded = readShardList(shards, sharding)
    const ranges: ShardRange<MysqlTarget>[] = []
    for (const shard of [...new Set(expanded)].sort((a, b) => a - b)) {
      const last = ranges[ranges.length - 1]
      if (last && last.to === shard - 1) last.to = shard
      else ranges.push({ from: shard, to: shard, target })
    }
    if (ranges.length === 0) throw new ConfigurationError('shards must not be an empty list.')
    return new ShardMap(sharding, ranges)
  }
  throw new ConfigurationError(
    'MysqlSource needs databases: a pool or URL (with shards), ranges of logical shards to pools or URLs, or a ShardMap.',
  )
}
