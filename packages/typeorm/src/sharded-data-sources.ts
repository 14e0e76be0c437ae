import {
  ConfigurationError,
  describeValue,
  type FanOutOptions,
  type FanOutRun,
  type IdInput,
  InvalidArgumentError,
  ShardHomes,
  type Sharding,
  type ShardKey,
  toBigInt,
} from '@shardflake/core'
import {
  type DataSource,
  type EntityManager,
  type EntityMetadata,
  type EntityTarget,
  type FindOperator,
  type ObjectLiteral,
  Raw,
  type Repository,
  type SaveOptions,
} from 'typeorm'
import { Placement, shardByField } from './placement'
import { findShardedId, registerSchemas, type ShardedIdEntry } from './sharded-id'
import { subscriberOf } from './sharded-ids'

/**
 * Where a transaction runs: the server holding the row with this ID, this shard key's shard, or
 * this logical shard.
 * @example
 * ```ts
 * import type { ShardTarget } from '@shardflake/typeorm'
 *
 * const byId: ShardTarget = { id: '7342519581384302598' }
 * const byKey: ShardTarget = { key: 'acme-corp' }
 * const byShard: ShardTarget = { shard: 17 }
 * ```
 */
export type ShardTarget =
  | { readonly id: IdInput }
  | { readonly key: ShardKey }
  | { readonly shard: number }

const routers = new WeakMap<ShardHomes<DataSource>, ShardedDataSources>()

/**
 * The DataSources of an application whose rows are spread over several servers, one DataSource
 * per server, routed by core's `ShardHomes`: reads by ID, key or shard go to one DataSource; a
 * {@link save} writes each new row on the server holding its shard, one `save()` per server; a
 * {@link transaction} runs on one server, and every DataSource refuses to insert a row whose
 * shard lives elsewhere (`WrongServerError`) before anything is written; {@link fanOut} is the
 * only way to query several servers. Joins and transactions across servers are not offered.
 *
 * Made by {@link shardedDataSources}.
 * @example
 * ```ts
 * const post = await sharded.repositoryFor(Post, postId).findOne({
 *   where: { id: postId },
 *   relations: { comments: true },
 * })
 * ```
 */
export class ShardedDataSources {
  /** @internal Made by {@link shardedDataSources}. */
  constructor(
    /** The routing this uses: the homes of the logical shards, and a DataSource per server. */
    readonly homes: ShardHomes<DataSource>,
  ) {}

  /** The application's sharding. */
  get sharding(): Sharding {
    return this.homes.sharding
  }

  /**
   * The DataSource of the server holding the row with this ID.
   * @throws InvalidIdError for a value that is not an ID; DirectoryStaleError as core's `forId`.
   * @example
   * ```ts
   * const post = await sharded.forId(postId).getRepository(Post).findOneBy({ id: postId })
   * ```
   */
  forId(id: IdInput): DataSource {
    return this.homes.forId(id)
  }

  /**
   * The DataSource of the server holding a shard key's shard.
   * @throws MissingShardKeyError for `null` or `undefined`.
   * @example
   * ```ts
   * const authors = await sharded.forKey(email).getRepository(Author).findBy({ email })
   * ```
   */
  forKey(key: ShardKey): DataSource {
    return this.homes.forKey(key)
  }

  /**
   * The DataSource of the server holding a logical shard.
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const count = await sharded.forShard(17).getRepository(Post).count()
   * ```
   */
  forShard(shard: number): DataSource {
    return this.homes.forShard(shard)
  }

  /**
   * The repository of `target` on the server holding the row with this ID (relation loads from
   * it stay on that server).
   * @example
   * ```ts
   * const post = await sharded.repositoryFor(Post, postId).findOne({
   *   where: { id: postId },
   *   relations: { comments: true },
   * })
   * ```
   */
  repositoryFor<T extends ObjectLiteral>(target: EntityTarget<T>, id: IdInput): Repository<T> {
    return this.forId(id).getRepository(target)
  }

  /**
   * Saves entities of `target`, each on the server holding its shard (the one its ID names, or
   * its `@ShardedId` rule gives a new row: its shard key, or its parent's ID), with the children
   * it cascades to: one `save()` per server, run at once. While a shard is being moved, waits for
   * the move to finish (core's `writeGroups`). A new row's parent must already have an ID.
   * @returns the entities given, with their IDs.
   * @throws MissingShardKeyError when a new row's rule cannot be evaluated (no key, no parent).
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeGroups`.
   * @example
   * ```ts
   * const posts = await sharded.save(Post, [
   *   Object.assign(new Post(), { author: ada, title: 'Hello' }),
   *   Object.assign(new Post(), { author: grace, title: 'World' }),
   * ])
   * ```
   */
  async save<T extends ObjectLiteral>(
    target: EntityTarget<T>,
    entities: T[],
    options?: SaveOptions,
  ): Promise<T[]>
  async save<T extends ObjectLiteral>(
    target: EntityTarget<T>,
    entity: T,
    options?: SaveOptions,
  ): Promise<T>
  async save<T extends ObjectLiteral>(
    target: EntityTarget<T>,
    entities: T | T[],
    options?: SaveOptions,
  ): Promise<T | T[]> {
    const list = Array.isArray(entities) ? entities : [entities]
    for (const entity of list) {
      if (typeof entity !== 'object' || entity === null) {
        throw new InvalidArgumentError(
          `save() takes entities of ${describeTarget(target)}, got ${describeValue(entity)}.`,
        )
      }
    }
    const metadata = this.metadataOf(target)
    const sharded = findShardedId(metadata.target)
    if (!sharded) {
      throw new ConfigurationError(
        `${metadata.name} has no @ShardedId key, so nothing says which server holds it: give it one, or write it through forShard(shard).`,
      )
    }
    if (list.length === 1) {
      const shard = this.shardOf(metadata, sharded, list[0]!)
      const { handle } = this.homes.writeHomeNow(shard) ?? (await this.homes.writeHome(shard))
      await handle.manager.save(target, list, options)
      return entities
    }
    const groups = await this.homes.writeGroups(list, (entity) =>
      this.shardOf(metadata, sharded, entity),
    )
    await Promise.all(
      [...groups.values()].map(({ handle, items }) => handle.manager.save(target, items, options)),
    )
    return entities
  }

  /**
   * Runs `run` in a transaction on the server holding `where` (an ID, a shard key or a logical
   * shard), once any move of that shard has finished. Inside it, a row of a shard living on
   * another server is refused with `WrongServerError` before it is written, and the transaction
   * is rolled back: there are no transactions across servers.
   * @throws WrongServerError, from `run`, for a row of another server.
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeHome`.
   * @example
   * ```ts
   * await sharded.transaction({ id: authorId }, async (manager) => {
   *   await manager.save(Object.assign(new Post(), { author: { id: authorId }, title: 'Hello' }))
   * })
   * ```
   */
  async transaction<R>(
    where: ShardTarget,
    run: (manager: EntityManager) => Promise<R>,
  ): Promise<R> {
    if (typeof run !== 'function') {
      throw new InvalidArgumentError('transaction() takes a function of the EntityManager.')
    }
    const { handle } = await this.homes.writeHome(this.shardOfTarget(where))
    return handle.transaction(run)
  }

  /**
   * A `where` condition on a sharded key: the row's ID is of one of `shards`. Give it to the
   * query of a {@link fanOut}, with the shards each server is asked about, so that a server
   * never answers for copies of a shard that was moved away from it. `T` is what the entities
   * carry in the key (`string`, or `bigint` with `idType: 'bigint'`).
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (dataSource, _server, shards) =>
   *     dataSource.getRepository(Post).find({
   *       where: { id: sharded.inShards(shards) },
   *       order: { id: 'DESC' },
   *       take: 20,
   *     }),
   *   { orderBy: (post) => post.id!, order: 'desc', limit: 20 },
   * )
   * ```
   */
  inShards<T = string>(shards: readonly number[]): FindOperator<T> {
    if (!Array.isArray(shards)) {
      throw new InvalidArgumentError(
        `inShards() takes an array of logical shards, got ${describeValue(shards)}.`,
      )
    }
    const list = [...new Set(shards.map((shard) => this.sharding.checkShard(shard)))]
    const { layout } = this.sharding
    const mask = 2 ** layout.shardBits - 1
    return Raw((column) =>
      list.length === 0
        ? '1 = 0'
        : `((${column} >> ${layout.shifts.shard}) & ${mask}) IN (${list.join(', ')})`,
    ) as FindOperator<T>
  }

  /**
   * Runs a query on the DataSource of every server (or of the servers holding `options.shards`)
   * and merges the rows: with `orderBy` (the row's ID) in ID order, stopping at `limit`. The only
   * way to read from several servers. See core's `ShardHomes.fanOut`.
   * @throws FanOutError when a server's query failed (`results`: what the others returned).
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (dataSource, _server, shards) =>
   *     dataSource.getRepository(Post).find({
   *       where: { id: sharded.inShards(shards) },
   *       order: { id: 'DESC' },
   *       take: 20,
   *     }),
   *   { orderBy: (post) => post.id!, order: 'desc', limit: 20 },
   * )
   * ```
   */
  fanOut<R>(run: FanOutRun<DataSource, R>, options?: FanOutOptions<R>): Promise<R[]> {
    return this.homes.fanOut(run, options)
  }

  private shardOfTarget(where: ShardTarget): number {
    if (typeof where === 'object' && where !== null) {
      if ('id' in where) return this.sharding.shardOfId(where.id)
      if ('key' in where) return this.sharding.shardForKey(where.key)
      if ('shard' in where) return this.sharding.checkShard(where.shard)
    }
    throw new InvalidArgumentError(
      `A transaction needs the server it runs on: { id }, { key } or { shard }, got ${describeValue(where)}.`,
    )
  }

  private metadataOf(target: EntityTarget<ObjectLiteral>): EntityMetadata {
    const [first] = this.homes.serverNames
    const dataSource = this.homes.handleOf(first!)
    if (!dataSource.hasMetadata(target)) {
      throw new InvalidArgumentError(
        `${describeTarget(target)} is not an entity of the DataSources: list it in their entities.`,
      )
    }
    registerSchemas(dataSource.options.entities)
    return dataSource.getMetadata(target)
  }

  /**
   * The shard of an entity: its ID's, or the one its rule gives a new row. Its DataSource's
   * subscriber places the row again by the same rule (a key is read in tens of nanoseconds, less
   * than it costs to hand the shard over) and checks that it is this server's.
   */
  private shardOf(
    metadata: EntityMetadata,
    sharded: ShardedIdEntry,
    entity: ObjectLiteral,
  ): number {
    const id: unknown = entity[sharded.propertyName]
    if (id !== undefined && id !== null) {
      return this.sharding.shardOfId(toBigInt(id, `${metadata.name}.${sharded.propertyName}`))
    }
    if (shardByField(sharded) !== undefined) {
      return this.sharding.resolveShard(sharded.rule, entity, metadata.name)
    }
    const item = { entity, metadata, sharded, roots: undefined, supplied: false }
    return new Placement(this.sharding, [item]).shardOf(item)
  }
}

/**
 * Routes an application's TypeORM DataSources, one per server, by core's `ShardHomes`: give
 * `ShardHomes.open` the DataSources as `servers`, each with `shardedIds()` installed (one source
 * for the application). From then on every DataSource refuses to insert or update a row whose
 * shard lives on another server (`WrongServerError`), whatever path wrote it (`save`, `insert`,
 * query builders, cascades). Calling it again with new `ShardHomes` (after closing the old ones)
 * routes the DataSources by the new ones.
 * @throws ConfigurationError when a DataSource has no `shardedIds()`, is given for two servers,
 * or draws from a source of another sharding.
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { shardedDataSources, shardedIds } from '@shardflake/typeorm'
 * import { DataSource } from 'typeorm'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const open = async (url: string) => {
 *   const dataSource = new DataSource({ type: 'postgres', url, entities: [Author, Post, Comment] })
 *   shardedIds(dataSource, { source })
 *   return dataSource.initialize()
 * }
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: await open(urlA), b: await open(urlB) },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const sharded = shardedDataSources(homes)
 * ```
 */
export function shardedDataSources(homes: ShardHomes<DataSource>): ShardedDataSources {
  if (!(homes instanceof ShardHomes)) {
    throw new InvalidArgumentError(
      'shardedDataSources() takes the ShardHomes of your DataSources: ShardHomes.open({ sharding, servers: { a: dataSourceA, ... }, directory }).',
    )
  }
  const existing = routers.get(homes)
  if (existing) return existing
  const seen = new Map<DataSource, string>()
  for (const server of homes.serverNames) {
    const dataSource = homes.handleOf(server)
    const subscriber = subscriberOf(dataSource)
    if (!subscriber) {
      throw new ConfigurationError(
        `The handle of server ${JSON.stringify(server)} is not a DataSource with shardedIds(): call shardedIds(dataSource, { source }) on every server's DataSource before initialize().`,
      )
    }
    const other = seen.get(dataSource)
    if (other !== undefined) {
      throw new ConfigurationError(
        `Servers ${JSON.stringify(other)} and ${JSON.stringify(server)} have the same DataSource: give each server a DataSource of its own.`,
      )
    }
    seen.set(dataSource, server)
    const sourceSharding = subscriber.source.sharding
    if (!sourceSharding) {
      throw new ConfigurationError(
        `The source of server ${JSON.stringify(server)}'s DataSource makes IDs without a shard: rows cannot be placed by their ID. Use a source of the application's sharding.`,
      )
    }
    homes.sharding.checkSame(sourceSharding, `The source of server ${JSON.stringify(server)}`)
  }
  for (const [dataSource, server] of seen) subscriberOf(dataSource)!.home = { homes, server }
  const router = new ShardedDataSources(homes)
  routers.set(homes, router)
  return router
}

function describeTarget(target: EntityTarget<ObjectLiteral>): string {
  if (typeof target === 'function') return target.name
  if (typeof target === 'string') return target
  return String((target as { name?: unknown }).name ?? 'the entity')
}
