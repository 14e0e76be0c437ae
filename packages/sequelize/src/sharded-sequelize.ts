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
  type ShardRule,
  toBigInt,
} from '@shardflake/core'
import {
  Association,
  type BulkCreateOptions,
  type CreateOptions,
  type CreationAttributes,
  type Includeable,
  literal,
  Model,
  type ModelStatic,
  type Sequelize,
  type Transaction,
  type TransactionOptions,
} from 'sequelize'
import { belongsToWithKey } from './checks'
import { collectNodes, hasIncludes, Placement } from './placement'
import type { ShardedKey } from './sharded-id'
import { installationOf, type ShardedIds } from './sharded-ids'

type AnyModel = ModelStatic<Model>
/** What `literal()` returns. */
type Literal = ReturnType<typeof literal>

/**
 * Where a transaction runs: the server holding the row with this ID, this shard key's shard, or
 * this logical shard.
 * @example
 * ```ts
 * import type { ShardTarget } from '@shardflake/sequelize'
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

/** A model named by its class (defined on any server's `Sequelize`) or by its name. */
export type ModelName<M extends Model = Model> = ModelStatic<M> | string

/** The server a routed `Sequelize` instance is, and the homes it is one server of. */
interface Home {
  readonly homes: ShardHomes<Sequelize>
  readonly server: string
}

const routers = new WeakMap<ShardHomes<Sequelize>, ShardedSequelize>()
/** The home of each routed `Sequelize` instance (replaced when routed by new `ShardHomes`). */
const homeOf = new WeakMap<Sequelize, Home>()

/**
 * The `Sequelize` instances of an application whose rows are spread over several servers, one
 * instance per server with the same models defined on each, routed by core's `ShardHomes`: reads
 * by ID, key or shard go to one instance's models; {@link create} and {@link bulkCreate} write
 * each new row on the server holding its shard, one `bulkCreate` (one INSERT) per server; a
 * {@link transaction} runs on one server, and every instance refuses to write a row whose shard
 * lives elsewhere (`WrongServerError`) before anything is written; {@link fanOut} is the only way
 * to query several servers. Joins and transactions across servers are not offered.
 *
 * Made by {@link shardedSequelize}.
 * @example
 * ```ts
 * const post = await sharded.modelFor('Post', postId).findByPk(postId, { include: ['comments'] })
 * ```
 */
export class ShardedSequelize {
  /** @internal Made by {@link shardedSequelize}. */
  constructor(
    /** The routing this uses: the homes of the logical shards, and a `Sequelize` per server. */
    readonly homes: ShardHomes<Sequelize>,
  ) {
    this.placingSequelize = homes.handleOf(homes.serverNames[0]!)
  }

  /** The first server's `Sequelize`, whose models place new records (every server has them). */
  private readonly placingSequelize: Sequelize
  /** The placer of each model's records written without `include`, by the placing model. */
  private readonly placers = new WeakMap<AnyModel, (values: object) => number>()

  /** The application's sharding. */
  get sharding(): Sharding {
    return this.homes.sharding
  }

  /**
   * The `Sequelize` of the server holding the row with this ID.
   * @throws InvalidIdError for a value that is not an ID; DirectoryStaleError as core's `forId`.
   * @example
   * ```ts
   * const post = await sharded.forId(postId).models.Post!.findByPk(postId)
   * ```
   */
  forId(id: IdInput): Sequelize {
    return this.homes.forId(id)
  }

  /**
   * The `Sequelize` of the server holding a shard key's shard.
   * @throws MissingShardKeyError for `null` or `undefined`.
   * @example
   * ```ts
   * const users = await sharded.forKey(email).models.User!.findAll({ where: { email } })
   * ```
   */
  forKey(key: ShardKey): Sequelize {
    return this.homes.forKey(key)
  }

  /**
   * The `Sequelize` of the server holding a logical shard.
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const count = await sharded.forShard(17).models.Post!.count()
   * ```
   */
  forShard(shard: number): Sequelize {
    return this.homes.forShard(shard)
  }

  /**
   * The model `model` (a class of any server, or its name) on the server holding the row with
   * this ID: `include`s of its queries stay on that server.
   * @throws ConfigurationError when that server's `Sequelize` has no such model.
   * @example
   * ```ts
   * const post = await sharded.modelFor('Post', postId).findByPk(postId, {
   *   include: [{ association: 'comments' }],
   * })
   * ```
   */
  modelFor<M extends Model>(model: ModelName<M>, id: IdInput): ModelStatic<M> {
    const name = nameOf(model)
    return modelOn(this.homes.forId(id), name) as ModelStatic<M>
  }

  /**
   * Creates one row of `model` (with what `options.include` nests in it) on the server holding
   * its shard: the one its ID names, or its `shardedId()` rule gives a new row (its shard key,
   * or its parent's ID). While the shard is being moved, waits for the move to finish (core's
   * `writeHome`). `include` may name associations (`'comments'`, `{ association: 'comments' }`)
   * or the models of any server: they are taken from the row's server.
   * @returns the instance, of the model on the row's server, with its ID.
   * @throws MissingShardKeyError when the rule cannot be evaluated (no key, no parent).
   * @throws InvalidArgumentError with `options.transaction` (use {@link transaction}).
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeHome`.
   * @example
   * ```ts
   * const post = await sharded.create(
   *   'Post',
   *   { authorId, title: 'Hello', comments: [{ body: 'First!' }] },
   *   { include: ['comments'] },
   * )
   * ```
   */
  async create<M extends Model>(
    model: ModelName<M>,
    values: CreationAttributes<M>,
    options?: Omit<CreateOptions, 'transaction'>,
  ): Promise<M> {
    const name = nameOf(model)
    checkValues(values, 'create')
    checkOptions(options, 'create')
    const shard = this.shardOf(name, values, options?.include)
    const { handle } = this.homes.writeHomeNow(shard) ?? (await this.homes.writeHome(shard))
    return (await modelOn(handle, name).create(values, optionsOn(handle, options))) as M
  }

  /**
   * Creates rows of `model` (with what `options.include` nests in them), each on the server
   * holding its shard (its ID's, or its rule's): one `bulkCreate` per server, hence one INSERT per
   * server, run at once. While a shard is being moved, waits for the move to finish (core's
   * `writeGroups`). Each server's `bulkCreate` is its own statement: one can fail while another
   * succeeds; the call fails with the first error once every server has answered.
   * @returns the instances, in the order of `records`, each of the model on its server.
   * @throws MissingShardKeyError when a rule cannot be evaluated (no key, no parent).
   * @throws InvalidArgumentError with `options.transaction` (use {@link transaction}).
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeGroups`.
   * @example
   * ```ts
   * const [hello, world] = await sharded.bulkCreate('Post', [
   *   { authorId: adaId, title: 'Hello' },
   *   { authorId: graceId, title: 'World' },
   * ])
   * ```
   */
  async bulkCreate<M extends Model>(
    model: ModelName<M>,
    records: readonly CreationAttributes<M>[],
    options?: Omit<BulkCreateOptions, 'transaction'>,
  ): Promise<M[]> {
    const name = nameOf(model)
    if (!Array.isArray(records)) {
      throw new InvalidArgumentError(
        `bulkCreate() takes an array of records: bulkCreate('${name}', [{ ... }]), got ${describeValue(records)}.`,
      )
    }
    for (const values of records) checkValues(values, 'bulkCreate')
    checkOptions(options, 'bulkCreate')
    const placer = this.placer(name, options?.include)
    // One record has one home: no grouping to do.
    const groups =
      records.length === 1
        ? undefined
        : await this.homes.writeGroups(
            records.map((_, index) => index),
            (index) => placer(records[index]!),
          )
    if (!groups || groups.size === 1) {
      // One server: its instances are the records' in their order.
      let handle: Sequelize
      if (groups) handle = groups.values().next().value!.handle
      else {
        const shard = placer(records[0]!)
        handle = (this.homes.writeHomeNow(shard) ?? (await this.homes.writeHome(shard))).handle
      }
      return (await modelOn(handle, name).bulkCreate(
        [...records],
        optionsOn(handle, options),
      )) as M[]
    }
    const created: M[] = new Array(records.length)
    const outcomes = await Promise.allSettled(
      [...groups.values()].map(async ({ handle, items }) => {
        const instances = await modelOn(handle, name).bulkCreate(
          items.map((index) => records[index]!),
          optionsOn(handle, options),
        )
        instances.forEach((instance, i) => {
          created[items[i]!] = instance as M
        })
      }),
    )
    const failed = outcomes.find((outcome) => outcome.status === 'rejected')
    if (failed) throw failed.reason
    return created
  }

  /**
   * Runs `run` in a managed transaction (`sequelize.transaction(options, run)`) on the server
   * holding `where` (an ID, a shard key or a logical shard), once any move of that shard has
   * finished. `run` gets the transaction and that server's `Sequelize`: use its models. Inside it,
   * a row of a shard living on another server is refused with `WrongServerError` before it is
   * written, and the transaction is rolled back: there are no transactions across servers.
   * @throws WrongServerError, from `run`, for a row of another server.
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeHome`.
   * @example
   * ```ts
   * await sharded.transaction({ id: authorId }, async (transaction, sequelize) => {
   *   await sequelize.models.Post!.create({ authorId, title: 'Hello' }, { transaction })
   * })
   * ```
   */
  async transaction<R>(
    where: ShardTarget,
    run: (transaction: Transaction, sequelize: Sequelize) => PromiseLike<R>,
    options: TransactionOptions = {},
  ): Promise<R> {
    if (typeof run !== 'function') {
      throw new InvalidArgumentError(
        'transaction() takes a function of the transaction and the server’s Sequelize.',
      )
    }
    const { handle } = await this.homes.writeHome(this.shardOfTarget(where))
    return handle.transaction(options, (transaction) => run(transaction, handle))
  }

  /**
   * A `where` condition on a sharded key: the row's ID is of one of `shards`. Give it to the
   * query of a {@link fanOut}, with the shards each server is asked about, so that a server
   * never answers for copies of a shard that was moved away from it.
   * @param column the key column, as the query names it (quoted for the servers' dialect).
   * @default column 'id'
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (sequelize, _server, shards) =>
   *     sequelize.models.Post!.findAll({
   *       where: sharded.inShards(shards),
   *       order: [['id', 'DESC']],
   *       limit: 20,
   *     }),
   *   { orderBy: (post) => post.get('id') as string, order: 'desc', limit: 20 },
   * )
   * ```
   */
  inShards(shards: readonly number[], column = 'id'): Literal {
    if (!Array.isArray(shards)) {
      throw new InvalidArgumentError(
        `inShards() takes an array of logical shards, got ${describeValue(shards)}.`,
      )
    }
    if (typeof column !== 'string' || !/^[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?$/.test(column)) {
      throw new InvalidArgumentError(
        `inShards() takes a column name such as 'id' or 'Post.id', got ${describeValue(column)}.`,
      )
    }
    const list = [...new Set(shards.map((shard) => this.sharding.checkShard(shard)))]
    if (list.length === 0) return literal('1 = 0')
    const [first] = this.homes.serverNames
    const quoted = this.homes.handleOf(first!).getQueryInterface().quoteIdentifiers(column)
    const { layout } = this.sharding
    const mask = 2 ** layout.shardBits - 1
    return literal(`((${quoted} >> ${layout.shifts.shard}) & ${mask}) IN (${list.join(', ')})`)
  }

  /**
   * Runs a query on the `Sequelize` of every server (or of the servers holding `options.shards`)
   * and merges the rows: with `orderBy` (the row's ID) in ID order, stopping at `limit`. The
   * only way to read from several servers. See core's `ShardHomes.fanOut`.
   * @throws FanOutError when a server's query failed (`results`: what the others returned).
   * @example
   * ```ts
   * const newest = await sharded.fanOut(
   *   (sequelize, _server, shards) =>
   *     sequelize.models.Post!.findAll({
   *       where: sharded.inShards(shards),
   *       order: [['id', 'DESC']],
   *       limit: 20,
   *     }),
   *   { orderBy: (post) => post.get('id') as string, order: 'desc', limit: 20 },
   * )
   * ```
   */
  fanOut<R>(run: FanOutRun<Sequelize, R>, options?: FanOutOptions<R>): Promise<R[]> {
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

  private shardOf(name: string, values: object, include: unknown): number {
    return this.placer(name, include)(values)
  }

  /**
   * The shard of new records of a model: the ID's when set, else the rule's, evaluated on an
   * instance built (not saved) with the first server's model and the call's includes.
   */
  private placer(name: string, include: unknown): (values: object) => number {
    const model = modelOn(this.placingSequelize, name)
    if (include !== undefined) return this.newPlacer(model, include)
    let placer = this.placers.get(model)
    if (!placer) {
      placer = this.newPlacer(model, undefined)
      this.placers.set(model, placer)
    }
    return placer
  }

  private newPlacer(model: AnyModel, include: unknown): (values: object) => number {
    const name = model.name
    const sequelize = this.placingSequelize
    const ids = installationOf(sequelize)!
    const key = ids.keyOf(model)
    if (!key) {
      throw new ConfigurationError(
        `${name} has no shardedId() attribute, so nothing says which server holds its rows: give it one, or write it through forShard(shard).`,
      )
    }
    const sharding = this.sharding
    const buildOptions =
      include === undefined ? {} : { include: remapInclude(include, sequelize) as Includeable[] }
    const direct = directRead(model, key.spec.rule)
    // The record `direct` places by: its one attribute, set per record (no object per record).
    const view: Record<string, unknown> = {}
    return (values) => {
      const id: unknown = Reflect.get(values, key.attribute)
      if (id !== undefined && id !== null) {
        return sharding.shardOfId(toBigInt(id as IdInput, `${name}.${key.attribute}`))
      }
      if (direct) {
        const value: unknown = Reflect.get(values, direct.attribute)
        if (typeof value === 'string' || typeof value === 'number' || typeof value === 'bigint') {
          if (direct.parent) return sharding.shardOfId(toBigInt(value, `Parent ID of ${name}`))
          const rule = key.spec.rule as ShardRule<Record<string, unknown>>
          view[direct.attribute] = value
          return sharding.resolveShard(rule, view, name)
        }
      }
      const instance = model.build(values as Record<string, unknown>, buildOptions)
      const nodes = collectNodes([instance], ids.keyOf)
      return new Placement(sharding, nodes, () => undefined).shardOf(nodes.get(instance)!)
    }
  }
}

/**
 * Routes an application's `Sequelize` instances, one per server, by core's `ShardHomes`: give
 * `ShardHomes.open` the instances as `servers`, each with `shardedIds()` installed (one source for
 * the application) and the same models defined. From then on every instance refuses to insert,
 * update or upsert a row whose shard lives on another server (`WrongServerError`), in hooks that
 * run after `shardedIds()` gave the row its ID and before anything is written, whatever path
 * wrote it (`create`, `bulkCreate`, nested creates, `save`, `upsert`). Calling it again with new
 * `ShardHomes` (after closing the old ones) routes the instances by the new ones.
 * @throws ConfigurationError when an instance has no `shardedIds()`, is given for two servers,
 * or draws from a source of another sharding.
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { shardedIds, shardedSequelize } from '@shardflake/sequelize'
 * import { Sequelize } from 'sequelize'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const open = (url: string) => {
 *   const sequelize = new Sequelize(url, { logging: false })
 *   shardedIds(sequelize, { source })
 *   defineModels(sequelize) // the same models on every server
 *   return sequelize
 * }
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: open(urlA), b: open(urlB) },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const sharded = shardedSequelize(homes)
 * ```
 */
export function shardedSequelize(homes: ShardHomes<Sequelize>): ShardedSequelize {
  if (!(homes instanceof ShardHomes)) {
    throw new InvalidArgumentError(
      'shardedSequelize() takes the ShardHomes of your Sequelize instances: ShardHomes.open({ sharding, servers: { a: sequelizeA, ... }, directory }).',
    )
  }
  const existing = routers.get(homes)
  if (existing) return existing
  const seen = new Map<Sequelize, string>()
  const installations = new Map<Sequelize, ShardedIds>()
  for (const server of homes.serverNames) {
    const sequelize = homes.handleOf(server)
    const ids =
      typeof sequelize === 'object' && sequelize !== null ? installationOf(sequelize) : undefined
    if (!ids) {
      throw new ConfigurationError(
        `The handle of server ${JSON.stringify(server)} is not a Sequelize instance with shardedIds(): call shardedIds(sequelize, { source }) on every server's Sequelize.`,
      )
    }
    const other = seen.get(sequelize)
    if (other !== undefined) {
      throw new ConfigurationError(
        `Servers ${JSON.stringify(other)} and ${JSON.stringify(server)} have the same Sequelize instance: give each server an instance of its own.`,
      )
    }
    seen.set(sequelize, server)
    const sourceSharding = ids.source.sharding
    if (!sourceSharding) {
      throw new ConfigurationError(
        `The source of server ${JSON.stringify(server)}'s Sequelize makes IDs without a shard: rows cannot be placed by their ID. Use a source of the application's sharding.`,
      )
    }
    homes.sharding.checkSame(sourceSharding, `The source of server ${JSON.stringify(server)}`)
    installations.set(sequelize, ids)
  }
  for (const [sequelize, server] of seen) {
    if (!homeOf.has(sequelize)) addGuards(sequelize, installations.get(sequelize)!)
    homeOf.set(sequelize, { homes, server })
  }
  const router = new ShardedSequelize(homes)
  routers.set(homes, router)
  return router
}

/**
 * Hooks, after those of `shardedIds()`, that refuse to write a row through a `Sequelize` that is
 * not its shard's home: every instance a create reaches (its includes too), a stored instance
 * saved, an upsert's values.
 */
function addGuards(sequelize: Sequelize, ids: ShardedIds): void {
  /** `includes`: false when the create had no `include` (none of its instances has any). */
  const check = (instances: readonly Model[], includes = true) => {
    const home = homeOf.get(sequelize)
    if (!home) return
    const { homes, server } = home
    const checked: boolean[] = [] // by shard: a write of thousands of rows has a few
    // What shardedIds()' hook of this write placed, in the order of the instances.
    const placed = ids.placedIn(instances)
    let at = 0
    const checkRow = (instance: Model, key: ShardedKey | undefined) => {
      if (!key) return
      // The value the INSERT writes (no getter runs).
      const id: unknown = instance.getDataValue(key.attribute)
      if (id === undefined || id === null) return // given its ID (and checked) in its own hook
      // The shard shardedIds() gave it, unless the ID changed since: then the ID's own.
      let shard: number | undefined
      if (placed?.instances[at] === instance) {
        if (placed.ids[at] === id) shard = placed.shards[at]
        at++
      }
      shard ??= ids.issuedShardOf(instance, id) ?? homes.sharding.shardOfId(id as IdInput)
      if (checked[shard] === true) return
      checked[shard] = true
      homes.checkHome(server, shard)
    }
    if (includes && instances.some(hasIncludes)) {
      for (const node of collectNodes(instances, ids.keyOf).values())
        checkRow(node.instance, node.key)
    } else {
      // No includes: the instances are every row of the write, most often of one model.
      let model: AnyModel | undefined
      let key: ShardedKey | undefined
      for (const instance of instances) {
        if (instance.constructor !== model) {
          model = instance.constructor as AnyModel
          key = ids.keyOf(model)
        }
        checkRow(instance, key)
      }
    }
  }
  sequelize.addHook('beforeCreate', 'shardflake-home', (instance) => check([instance]))
  // A bulk create builds its instances with its own `include`, so without one they have none.
  sequelize.addHook('beforeBulkCreate', 'shardflake-home', (instances, options) =>
    check(instances, options.include !== undefined),
  )
  sequelize.addHook('beforeUpdate', 'shardflake-home', (instance) => check([instance]))
  sequelize.addHook('beforeUpsert', 'shardflake-home', (values, options) => {
    const home = homeOf.get(sequelize)
    const model = (options as { model?: AnyModel }).model
    const key = model && ids.keyOf(model)
    if (!home || !key) return
    const id: unknown = Reflect.get(values, key.attribute)
    if (id === undefined || id === null) return // refused by shardedIds()
    home.homes.checkHome(home.server, home.homes.sharding.shardOfId(id as IdInput))
  })
}

const STORED_AS_GIVEN = new Set([
  'STRING',
  'CHAR',
  'TEXT',
  'CITEXT',
  'UUID',
  'TINYINT',
  'SMALLINT',
  'MEDIUMINT',
  'INTEGER',
  'BIGINT',
])

/**
 * The attribute a rule reads when a record's own value gives the same shard as the rule on a
 * built instance: `shardBy` an attribute, or `sameShardAs` a `belongsTo` (or its foreign key),
 * stored as given (no custom getter or setter, not `VIRTUAL`). Anything else (functions, getters,
 * setters, defaults, parents given as instances) is placed on a built instance.
 */
function directRead(
  model: AnyModel,
  rule: unknown,
): { readonly attribute: string; readonly parent: boolean } | undefined {
  if (typeof rule !== 'object' || rule === null) return undefined
  let attribute: string
  let parent = false
  if ('shardBy' in rule && typeof rule.shardBy === 'string') {
    attribute = rule.shardBy
  } else if ('sameShardAs' in rule && typeof rule.sameShardAs === 'string') {
    const association =
      model.associations[rule.sameShardAs] ?? belongsToWithKey(model, rule.sameShardAs)
    attribute = association?.foreignKey ?? rule.sameShardAs
    parent = true
  } else {
    return undefined
  }
  const definition = model.getAttributes()[attribute] as
    | { type?: unknown; get?: unknown; set?: unknown }
    | undefined
  if (!definition || definition.get || definition.set) return undefined
  // Types Sequelize stores as given (a DATE string becomes a Date, a VIRTUAL may be computed).
  const type: unknown = Reflect.get(Object(definition.type), 'key')
  if (typeof type !== 'string' || !STORED_AS_GIVEN.has(type)) return undefined
  for (const custom of ['_customGetters', '_customSetters']) {
    const accessors: unknown = Reflect.get(model.prototype, custom)
    if (typeof accessors === 'object' && accessors !== null && attribute in accessors) {
      return undefined
    }
  }
  return { attribute, parent }
}

function nameOf(model: ModelName): string {
  if (typeof model === 'string' && model !== '') return model
  if (typeof model === 'function' && model.prototype instanceof Model) return model.name
  throw new InvalidArgumentError(
    `Expected a model (its class, of any server, or its name), got ${describeValue(model)}.`,
  )
}

function modelOn(sequelize: Sequelize, name: string): AnyModel {
  // `sequelize.models` holds the defined models by name (`model(name)` searches a list for it).
  const model = Object.hasOwn(sequelize.models, name) ? sequelize.models[name] : undefined
  if (!model) {
    const server = homeOf.get(sequelize)?.server
    throw new ConfigurationError(
      `Model ${JSON.stringify(name)} is not defined on the Sequelize of server ${JSON.stringify(server ?? '?')}: define every model on every server's Sequelize.`,
    )
  }
  return model
}

function checkValues(values: unknown, call: string): void {
  if (typeof values !== 'object' || values === null || Array.isArray(values)) {
    throw new InvalidArgumentError(
      `${call}() takes records: objects of attribute values, got ${describeValue(values)}.`,
    )
  }
}

function checkOptions(options: unknown, call: string): void {
  if (options === undefined) return
  if (typeof options !== 'object' || options === null) {
    throw new InvalidArgumentError(
      `${call}() options must be an object, got ${describeValue(options)}.`,
    )
  }
  if ('transaction' in options && options.transaction !== undefined) {
    throw new InvalidArgumentError(
      `${call}() on the router takes no transaction: a transaction lives on one server. Run it in transaction({ id }, (transaction, sequelize) => ...) with that server's models.`,
    )
  }
}

/** The call's options for one server: includes naming other servers' models remapped to it. */
function optionsOn<O extends { include?: unknown; fields?: unknown }>(
  sequelize: Sequelize,
  options: O | undefined,
): O {
  if (!options) return {} as O
  const copy = { ...options }
  if (options.include !== undefined) copy.include = remapInclude(options.include, sequelize)
  // Sequelize and shardedIds() may add to `fields`: each server gets its own list.
  if (Array.isArray(options.fields)) copy.fields = [...options.fields]
  return copy
}

/**
 * An `include` option for one server: model classes (of whichever server) become that server's
 * model of the same name, association objects their alias; names are kept.
 */
function remapInclude(include: unknown, sequelize: Sequelize): unknown {
  if (Array.isArray(include)) return include.map((item) => remapInclude(item, sequelize))
  if (typeof include === 'function' && include.prototype instanceof Model) {
    return modelOn(sequelize, include.name)
  }
  if (include instanceof Association) return include.as
  if (typeof include !== 'object' || include === null) return include
  const copy: Record<string, unknown> = { ...include }
  const model: unknown = copy.model
  if (typeof model === 'function' && model.prototype instanceof Model) {
    copy.model = modelOn(sequelize, model.name)
  }
  if (copy.association instanceof Association) copy.association = copy.association.as
  if (copy.include !== undefined) copy.include = remapInclude(copy.include, sequelize)
  return copy
}
