import { throwIfCancelled } from './deadline'
import { ConfigurationError, InvalidArgumentError } from './errors'
import { checkContext, checkCount, type IdRequestContext, type IdSource } from './id-source'
import { describeValue } from './known-options'
import { ShardMap, type ShardRange } from './shard-map'
import type { Sharding } from './sharding'

/**
 * One `IdSource` over several, each serving its own range of logical shards: the in-process
 * generator for shards 0-999 and PostgreSQL for 1000-1999, say. Because ranges may not overlap,
 * no logical shard can get two sources (whose IDs could meet); because every source must share
 * the application's sharding, one key lands on one shard whichever source serves it.
 *
 * @throws ShardingMismatchError when a source's sharding differs from `sharding`.
 * @throws ConfigurationError for a source without a layout (a ticket server).
 * @throws InvalidArgumentError when ranges overlap.
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram, RoutedSource, type IdSource } from '@shardflake/core'
 * declare const postgresSource: IdSource
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new RoutedSource(sharding, [
 *   { from: 0, to: 999, target: new InProcessSource({ sharding, shards: { from: 0, to: 999 } }) },
 *   { from: 1000, to: 1999, target: postgresSource },
 * ])
 * await source.nextId(1341) // from PostgreSQL
 * ```
 */
export class RoutedSource implements IdSource {
  readonly sharding: Sharding
  readonly synchronous: boolean
  /** Which source serves which shards. */
  readonly shardMap: ShardMap<IdSource>

  constructor(sharding: Sharding, ranges: readonly ShardRange<IdSource>[]) {
    // Shape first (sharding, ranges, bounds); then what each target makes.
    const map = new ShardMap(sharding, ranges)
    for (const { target, from, to } of map.ranges) {
      const source = target as Partial<IdSource> | null
      if (
        typeof source !== 'object' ||
        source === null ||
        typeof source.nextId !== 'function' ||
        typeof source.nextIds !== 'function' ||
        typeof source.close !== 'function'
      ) {
        throw new InvalidArgumentError(
          `The target of shards ${from}-${to} must be an ID source (nextId, nextIds, close), got ${describeValue(target)}.`,
        )
      }
      if (!target.sharding) {
        throw new ConfigurationError(
          `The source for shards ${from}-${to} makes IDs without a layout (a ticket server): their shard could not be read back, so co-located rows would land on the wrong shard. Route only sources of the application's sharding.`,
        )
      }
      sharding.checkSame(target.sharding, `The source for shards ${from}-${to}`)
    }
    this.sharding = sharding
    this.shardMap = map
    this.synchronous = this.shardMap.targets().every((source) => source.synchronous)
  }

  nextId(shard: number, context?: IdRequestContext): bigint | Promise<bigint> {
    const call = () => {
      checkContext(context, `the source of shard ${shard}`)
      throwIfCancelled(context?.signal, `the source of shard ${shard}`)
      return this.shardMap.targetFor(shard).nextId(shard, context)
    }
    // An asynchronous source answers with a promise for every shard, and fails by rejecting.
    return this.synchronous ? call() : Promise.resolve().then(call)
  }

  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] | Promise<bigint[]> {
    const call = () => {
      checkCount(count)
      checkContext(context, `the source of shard ${shard}`)
      throwIfCancelled(context?.signal, `the source of shard ${shard}`)
      return this.shardMap.targetFor(shard).nextIds(shard, count, context)
    }
    return this.synchronous ? call() : Promise.resolve().then(call)
  }

  /** Closes every source. */
  async close(): Promise<void> {
    await Promise.all(this.shardMap.targets().map((source) => source.close()))
  }
}
