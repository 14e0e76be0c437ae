import { ConfigurationError, LayoutMismatchError } from './errors'
import type { IdRequestContext, IdSource } from './id-source'
import type { Layout } from './layout'
import { ShardMap, type ShardRange } from './shard-map'

/**
 * One `IdSource` over several, each serving its own range of logical shards: the in-process
 * generator for shards 0-999 and PostgreSQL for 1000-1999, say. Because ranges may not overlap,
 * no logical shard can get two sources (whose IDs could meet); because every source must share
 * one layout, IDs stay comparable.
 *
 * @throws LayoutMismatchError when the sources' layouts differ.
 * @throws ConfigurationError for a source without a layout (a ticket server).
 * @throws InvalidArgumentError when ranges overlap.
 * @example
 * ```ts
 * const source = new RoutedSource(instagram, [
 *   { from: 0, to: 999, target: new InProcessSource({ layout: instagram, shards: { from: 0, to: 999 } }) },
 *   { from: 1000, to: 1999, target: postgresSource },
 * ])
 * await source.nextId(1341) // from PostgreSQL
 * ```
 */
export class RoutedSource implements IdSource {
  readonly layout: Layout
  readonly synchronous: boolean
  readonly logicalShards: number
  /** Which source serves which shards. */
  readonly map: ShardMap<IdSource>

  constructor(
    layout: Layout,
    ranges: readonly ShardRange<IdSource>[],
    options: { logicalShards?: number } = {},
  ) {
    for (const { target, from, to } of ranges) {
      if (!target.layout) {
        throw new ConfigurationError(
          `The source for shards ${from}-${to} makes IDs without a layout (a ticket server): their shard could not be read back, so co-located rows would land on the wrong shard. Route only sources of layout ${JSON.stringify(layout.name)}.`,
        )
      }
      if (!target.layout.equals(layout)) {
        throw new LayoutMismatchError(
          `The source for shards ${from}-${to} makes IDs of layout ${JSON.stringify(target.layout.name)}, not ${JSON.stringify(layout.name)}: IDs of one application must share one layout.`,
        )
      }
    }
    this.layout = layout
    this.map = new ShardMap(layout, ranges)
    this.synchronous = this.map.targets().every((source) => source.synchronous)
    this.logicalShards = options.logicalShards ?? (this.map.ranges.at(-1)?.to ?? -1) + 1
  }

  nextId(shard: number, context?: IdRequestContext): bigint | Promise<bigint> {
    return this.map.targetFor(shard).nextId(shard, context)
  }

  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] | Promise<bigint[]> {
    return this.map.targetFor(shard).nextIds(shard, count, context)
  }

  /** Closes every source. */
  async close(): Promise<void> {
    await Promise.all(this.map.targets().map((source) => source.close?.()))
  }
}
