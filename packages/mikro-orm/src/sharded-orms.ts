import type {
  EntityMetadata,
  EntityName,
  EventSubscriber,
  MikroORM,
  RequiredEntityData,
} from '@mikro-orm/core'
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
import type { Placement } from './placement'
import { shardedKeyOf } from './sharded-id'
import { ShardedIdSubscriber } from './subscriber'

type ShardedKey = NonNullable<ReturnType<typeof shardedKeyOf>>

/**
 * Where a transaction runs: the server holding the row with this ID, this shard key's shard, or
 * this logical shard.
 * @example
 * ```ts
 * import type { ShardTarget } from '@shardflake/mikro-orm'
 *
 * const byId: ShardTarget = { id: 7342519581384302598n }
 * const byKey: ShardTarget = { key: 'acme-corp' }
 * const byShard: ShardTarget = { shard: 17 }
 * ```
 */
export type ShardTarget =
  | { readonly id: IdInput }
  | { readonly key: ShardKey }
  | { readonly shard: number }

const routers = new WeakMap<ShardHomes<MikroORM>, ShardedOrms<MikroORM>>()

/**
 * The MikroORM instances of an application whose rows are spread over several servers, one
 * instance per server, routed by core's `ShardHomes`: reads by ID, key or shard get a fork of one
 * server's `em`; {@link createAndFlush} writes each new entity on the server holding its shard,
 * one flush per server; {@link transactional} runs on one server, whose `shardedIds()` refuses
 * every entity of another server (`WrongServerError`) before the flush writes anything;
 * {@link fanOut} is the only way to query several servers. Joins and transactions across servers
 * are not offered.
 *
 * Made by {@link shardedOrms}.
 * @example
 * ```ts
 * const post = await sharded.forId(postId).findOne(Post, postId, { populate: ['comments'] })
 * ```
 */
export class ShardedOrms<O extends MikroORM = MikroORM> {
  /** Applies the shard rules to new entity data (any server's: each has the same entities). */
  readonly #placement: Placement

  /** @internal Made by {@link shardedOrms}. */
  constructor(
    /** The routing this uses: the homes of the logical shards, and a MikroORM per server. */
    readonly homes: ShardHomes<O>,
  ) {
    const [first] = homes.serverNames
    this.#placement = subscriberOf(homes.handleOf(first!))!.placement
  }

  /** The application's sharding. */
  get sharding(): Sharding {
    return this.homes.sharding
  }

  /**
   * A fork of the `em` of the server holding the row with this ID.
   * @throws InvalidIdError for a value that is not an ID; DirectoryStaleError as core's `forId`.
   * @example
   * ```ts
   * const post = await sharded.forId(postId).findOne(Post, postId, { populate: ['comments'] })
   * ```
   */
  forId(id: IdInput): O['em'] {
    return this.homes.forId(id).em.fork() as O['em']
  }

  /**
   * A fork of the `em` of the server holding a shard key's shard.
   * @throws MissingShardKeyError for `null` or `undefined`.
   * @example
   * ```ts
   * const authors = await sharded.forKey(email).find(Author, { email })
   * ```
   */
  forKey(key: ShardKey): O['em'] {
    return this.homes.forKey(key).em.fork() as O['em']
  }

  /**
   * A fork of the `em` of the server holding a logical shard.
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const count = await sharded.forShard(17).count(Post)
   * ```
   */
  forShard(shard: number): O['em'] {
    return this.homes.forShard(shard).em.fork() as O['em']
  }

  /**
   * Creates entities of `entityName` from `data` (relations by ID or data, nested collections
   * cascade), each on the server holding its shard (the one its ID names, or its rule gives: its
   * shard key, or its parent's ID), and flushes: one `em.create()` batch and one flush per
   * server, run at once. While a shard is being moved, waits for the move to finish (core's
   * `writeGroups`). MikroORM splits each server's flush into INSERTs of `batchSize` rows (300 by
   * default): open the instances with a `batchSize` covering a server's share of `data` for one
   * INSERT per server and table.
   * @returns the created entities, in the order of `data`, with their IDs.
   * @throws MissingShardKeyError when a rule cannot be evaluated (no key, no parent).
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeGroups`.
   * @example
   * ```ts
   * const [hello, world] = await sharded.createAndFlush(Post, [
   *   { author: adaId, title: 'Hello' },
   *   { author: graceId, title: 'World', comments: [{ body: 'First!' }] },
   * ])
   * ```
   */
  async createAndFlush<T extends object>(
    entityName: EntityName<T>,
    data: readonly RequiredEntityData<T>[],
  ): Promise<T[]> {
    if (!Array.isArray(data)) {
      throw new InvalidArgumentError(
        'createAndFlush() takes an array of entity data: createAndFlush(Post, [{ ... }]).',
      )
    }
    for (const item of data) {
      if (typeof item !== 'object' || item === null) {
        throw new InvalidArgumentError(
          `createAndFlush() takes objects of entity data, got ${describeValue(item)}.`,
        )
      }
    }
    const meta = this.metadataOf(entityName as EntityName<object>)
    const key = this.keyOf(meta)
    if (data.length === 1) {
      // One row: its home, one flush there, without the groups' closures and arrays.
      const shard = this.shardOf(meta, key, data[0]!)
      const { handle } = this.homes.writeHomeNow(shard) ?? (await this.homes.writeHome(shard))
      const em = handle.em.fork()
      const entity = em.create(entityName, data[0]!)
      await em.flush()
      return [entity]
    }
    const created: T[] = new Array(data.length)
    const flushOn = async (orm: O, indexes: readonly number[]) => {
      const em = orm.em.fork()
      for (const index of indexes) created[index] = em.create(entityName, data[index]!)
      await em.flush()
    }
    const groups = await this.homes.writeGroups(
      data.map((_, index) => index),
      (index) => this.shardOf(meta, key, data[index]!),
    )
    await Promise.all([...groups.values()].map(({ handle, items }) => flushOn(handle, items)))
    return created
  }

  /**
   * Runs `run` in a transaction on the server holding `where` (an ID, a shard key or a logical
   * shard), once any move of that shard has finished. Inside it, a flush that would write a row
   * of a shard living on another server fails with `WrongServerError` before it writes anything,
   * and the transaction is rolled back: there are no transactions across servers.
   * @throws WrongServerError, from `run`, for a row of another server.
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeHome`.
   * @example
   * ```ts
   * await sharded.transactional({ id: authorId }, async (em) => {
   *   em.create(Post, { author: authorId, title: 'Hello' })
   *   await em.flush()
   * })
   * ```
   */
  async transactional<R>(where: ShardTarget, run: (em: O['em']) => Promise<R>): Promise<R> {
    if (typeof run !== 'function') {
      throw new InvalidArgumentError('transactional() takes a function of the EntityManager.')
    }
    const { handle } = await this.homes.writeHome(this.shardOfTarget(where))
    return handle.em.fork().transactional((em) => run(em as O['em']))
  }

  /**
   * An SQL condition on a sharded key column: the row's ID is of one of `shards`. Give it to the
   * query of a {@link fanOut} (`qb.where(...)`), with the shards each server is asked about, so
   * that a server never answers for copies of a shard that was moved away from it.
   * @param column the key column, as the query names it.
   * @default column 'id'
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (em, _server, shards) =>
   *     em.createQueryBuilder(Post).where(sharded.inShards(shards)).orderBy({ id: 'desc' }).limit(20).getResult(),
   *   { orderBy: (post) => post.id, order: 'desc', limit: 20 },
   * )
   * ```
   */
  inShards(shards: readonly number[], column = 'id'): string {
    if (!Array.isArray(shards)) {
      throw new InvalidArgumentError(
        `inShards() takes an array of logical shards, got ${describeValue(shards)}.`,
      )
    }
    if (typeof column !== 'string' || !/^[A-Za-z_][\w.]*$/.test(column)) {
      throw new InvalidArgumentError(
        `inShards() takes a column name such as 'id' or 'p.id', got ${describeValue(column)}.`,
      )
    }
    const list = [...new Set(shards.map((shard) => this.sharding.checkShard(shard)))]
    const { layout } = this.sharding
    const mask = 2 ** layout.shardBits - 1
    return list.length === 0
      ? '1 = 0'
      : `((${column} >> ${layout.shifts.shard}) & ${mask}) IN (${list.join(', ')})`
  }

  /**
   * Runs a query on a fork of the `em` of every server (or of the servers holding
   * `options.shards`) and merges the rows: with `orderBy` (the row's ID) in ID order, stopping
   * at `limit`. The only way to read from several servers. See core's `ShardHomes.fanOut`.
   * @throws FanOutError when a server's query failed (`results`: what the others returned).
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (em, _server, shards) =>
   *     em.createQueryBuilder(Post).where(sharded.inShards(shards)).orderBy({ id: 'desc' }).limit(20).getResult(),
   *   { orderBy: (post) => post.id, order: 'desc', limit: 20 },
   * )
   * ```
   */
  fanOut<R>(run: FanOutRun<O['em'], R>, options?: FanOutOptions<R>): Promise<R[]> {
    if (typeof run !== 'function') {
      throw new InvalidArgumentError('fanOut() takes a function of the EntityManager.')
    }
    return this.homes.fanOut(
      (orm, server, shards, signal) => run(orm.em.fork() as O['em'], server, shards, signal),
      options,
    )
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

  private metadataOf(entityName: EntityName<object>): EntityMetadata {
    const [first] = this.homes.serverNames
    const meta = this.homes.handleOf(first!).getMetadata().find(entityName)
    if (!meta) {
      throw new InvalidArgumentError(
        `${describeName(entityName)} is not an entity of the ORMs: list it in their entities.`,
      )
    }
    return meta
  }

  /** The sharded key of an entity the router writes. */
  private keyOf(meta: EntityMetadata): ShardedKey {
    const key = shardedKeyOf(meta)
    if (!key) {
      throw new ConfigurationError(
        `${meta.className} has no sharded key, so nothing says which server holds it: give it one, or write it through forShard(shard).`,
      )
    }
    return key
  }

  /** The shard of new entity data: its ID's, or the one its rule gives. */
  private shardOf(meta: EntityMetadata, key: ShardedKey, data: object): number {
    const id = (data as Record<string, unknown>)[key.prop.name]
    if (id !== undefined && id !== null) {
      return this.sharding.shardOfId(toBigInt(id as IdInput, `${meta.className}.${key.prop.name}`))
    }
    return this.#placement.shardOf(data, meta, key)
  }
}

/**
 * Routes an application's MikroORM instances, one per server, by core's `ShardHomes`: give
 * `ShardHomes.open` the instances as `servers`, each with the `shardedIds()` extension (one source
 * for the application). From then on every instance refuses to flush a row whose shard lives on
 * another server (`WrongServerError`), before anything is written. Calling it again with new
 * `ShardHomes` (after closing the old ones) routes the instances by the new ones.
 * @throws ConfigurationError when an instance has no `shardedIds()`, is given for two servers,
 * or draws from a source of another sharding.
 * @example
 * ```ts
 * import { MikroORM } from '@mikro-orm/postgresql'
 * import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { shardedIds, shardedOrms } from '@shardflake/mikro-orm'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const open = (clientUrl: string) =>
 *   MikroORM.init({ clientUrl, entities: [Author, Post, Comment], extensions: [shardedIds({ source })] })
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: await open(urlA), b: await open(urlB) },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const sharded = shardedOrms(homes)
 * ```
 */
export function shardedOrms<O extends MikroORM>(homes: ShardHomes<O>): ShardedOrms<O> {
  if (!(homes instanceof ShardHomes)) {
    throw new InvalidArgumentError(
      'shardedOrms() takes the ShardHomes of your MikroORM instances: ShardHomes.open({ sharding, servers: { a: ormA, ... }, directory }).',
    )
  }
  const existing = routers.get(homes as ShardHomes<MikroORM>)
  if (existing) return existing as ShardedOrms<O>
  const seen = new Map<O, string>()
  const subscribers = new Map<ShardedIdSubscriber, string>()
  for (const server of homes.serverNames) {
    const orm = homes.handleOf(server)
    const subscriber =
      typeof orm === 'object' && orm !== null && 'config' in orm ? subscriberOf(orm) : undefined
    if (!subscriber) {
      throw new ConfigurationError(
        `The handle of server ${JSON.stringify(server)} is not a MikroORM with shardedIds(): give every server's MikroORM.init() extensions: [shardedIds({ source })].`,
      )
    }
    const other = seen.get(orm)
    if (other !== undefined) {
      throw new ConfigurationError(
        `Servers ${JSON.stringify(other)} and ${JSON.stringify(server)} have the same MikroORM: give each server an instance of its own.`,
      )
    }
    seen.set(orm, server)
    const sourceSharding = subscriber.source.sharding
    if (!sourceSharding) {
      throw new ConfigurationError(
        `The source of server ${JSON.stringify(server)}'s MikroORM makes IDs without a shard: rows cannot be placed by their ID. Use a source of the application's sharding.`,
      )
    }
    homes.sharding.checkSame(sourceSharding, `The source of server ${JSON.stringify(server)}`)
    subscribers.set(subscriber, server)
  }
  for (const [subscriber, server] of subscribers) subscriber.home = { homes, server }
  const router = new ShardedOrms(homes)
  routers.set(homes as ShardHomes<MikroORM>, router as ShardedOrms<MikroORM>)
  return router
}

function subscriberOf(orm: MikroORM): ShardedIdSubscriber | undefined {
  const subscribers = orm.config.get('subscribers') as Iterable<EventSubscriber>
  for (const subscriber of subscribers) {
    if (subscriber instanceof ShardedIdSubscriber) return subscriber
  }
  return undefined
}

function describeName(entityName: EntityName<object>): string {
  if (typeof entityName === 'function') return entityName.name
  if (typeof entityName === 'string') return entityName
  return String((entityName as { name?: unknown }).name ?? 'the entity')
}
