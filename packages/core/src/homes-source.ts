import { ConfigurationError, InvalidArgumentError, ShardMovedError } from './errors'
import { checkContext, checkCount, type IdRequestContext, type IdSource } from './id-source'
import { checkKnownOptions, describeValue } from './known-options'
import type { ShardHomes } from './shard-homes'
import type { Sharding } from './sharding'

/** What {@link HomesSource} takes. */
export interface HomesSourceOptions {
  /** The application's homes: a shard's IDs are drawn on the server its rows are written to. */
  readonly homes: ShardHomes<unknown>
  /**
   * One ID source per server of `homes`, by server name: a `PostgresSource` or `MysqlSource` over
   * that server's pool, say. Each must share the homes' sharding. They stay open on `close()`.
   */
  readonly sources: Readonly<Record<string, IdSource>>
}

const OPTIONS = ['homes', 'sources']

/**
 * IDs drawn on each logical shard's home server, for applications whose IDs come from the
 * database (`next_id()` on PostgreSQL, the stored routines on MariaDB) and whose rows live on
 * their shard's server (`ShardHomes`): the ID of a row comes from the server the row is written
 * to, and follows the shard when `moveShardHomes` moves it (with `moveIds` moving ID generation,
 * `movePostgresShards`/`moveMysqlShards`, in the switch). While a shard is being moved, draws wait
 * like writes do (`switchWaitMs`, then a retryable `ShardMovingError`).
 *
 * @throws ConfigurationError when a server of the homes has no source, or a source has no layout
 * (a ticket server) or another sharding.
 * @example
 * ```ts
 * import { HomesSource, type IdSource, type ShardHomes } from '@shardflake/core'
 * declare const homes: ShardHomes<unknown>
 * declare const a: IdSource, b: IdSource, c: IdSource // new PostgresSource({ sharding, databases: poolA }), ...
 *
 * const source = new HomesSource({ homes, sources: { a, b, c } })
 * await source.nextId(17) // drawn on the server holding shard 17
 * ```
 */
export class HomesSource implements IdSource {
  readonly sharding: Sharding
  readonly synchronous = false
  private readonly homes: ShardHomes<unknown>
  private readonly sources: ReadonlyMap<string, IdSource>

  constructor(options: HomesSourceOptions) {
    checkKnownOptions('HomesSource options', options, OPTIONS)
    const { homes, sources } = options
    if (typeof homes?.writeHome !== 'function' || !Array.isArray(homes.serverNames)) {
      throw new InvalidArgumentError(
        `HomesSource needs homes (a ShardHomes), got ${describeValue(homes)}.`,
      )
    }
    if (typeof sources !== 'object' || sources === null) {
      throw new InvalidArgumentError(
        `HomesSource needs sources, one ID source per server by name, got ${describeValue(sources)}.`,
      )
    }
    this.sharding = homes.sharding
    const map = new Map<string, IdSource>()
    for (const server of homes.serverNames) {
      const source = (sources as Record<string, IdSource | undefined>)[server]
      if (typeof source?.nextId !== 'function' || typeof source.nextIds !== 'function') {
        throw new ConfigurationError(
          `HomesSource has no ID source for server ${JSON.stringify(server)} of the homes: give one per server (${homes.serverNames.join(', ')}).`,
        )
      }
      if (!source.sharding) {
        throw new ConfigurationError(
          `The source of server ${JSON.stringify(server)} makes IDs without a layout (a ticket server): their shard could not be read back. Give sources of the application's sharding.`,
        )
      }
      this.sharding.checkSame(source.sharding, `The source of server ${JSON.stringify(server)}`)
      map.set(server, source)
    }
    this.homes = homes
    this.sources = map
  }

  nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return this.drawn(shard, context, (source) => source.nextId(shard, context))
  }

  nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    return this.drawn(shard, context, (source) => source.nextIds(shard, count, context))
  }

  /** Leaves the servers' sources open: they were given. */
  close(): void {}

  /**
   * Draws on the shard's home. A draw routed just before a move's flip may meet the old home's
   * fence (`ShardMovedError`): it is routed again once, on a fresh reading of the directory.
   */
  private async drawn<T>(
    shard: number,
    context: IdRequestContext | undefined,
    draw: (source: IdSource) => T | Promise<T>,
  ): Promise<T> {
    checkContext(context, `the source of shard ${shard}`)
    const { server } = await this.homes.writeHome(shard, context?.signal)
    try {
      return await draw(this.sources.get(server)!)
    } catch (error) {
      if (!(error instanceof ShardMovedError)) throw error
      await this.homes.refresh(context?.signal)
      const again = await this.homes.writeHome(shard, context?.signal)
      if (again.server === server) throw error
      return await draw(this.sources.get(again.server)!)
    }
  }
}
