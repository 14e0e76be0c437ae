/**
 * One Kysely instance per server, routed by core's `ShardHomes`: inserts split by server, reads
 * by ID or key on one server, transactions on one server, fan-outs explicit, and every handed-out
 * instance guarded against writing a row whose shard lives elsewhere.
 */
import {
  ConfigurationError,
  describeValue,
  distinctShards,
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
  type CompiledQuery,
  type ConnectionProvider,
  createQueryId,
  type DatabaseConnection,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type InsertQueryBuilder,
  type InsertQueryNode,
  type InsertResult,
  type Kysely,
  Kysely as KyselyClass,
  type KyselyPlugin,
  type MergeQueryNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RawBuilder,
  type RootOperationNode,
  type SqlBool,
  sql,
  type Transaction,
  type UnknownRow,
  type ValueNode,
  type ValuesItemNode,
  type ValuesNode,
  type WithNode,
} from 'kysely'
import { namedIds } from './key-changes'
import { PendingId } from './pending-id'
import { type Placement, SQL_EXPRESSION } from './placement'
import { type AnyDatabase, type PluginRouting, routingOf, ShardedIdsPlugin } from './sharded-ids'

/**
 * Where a transaction runs: the server holding the row with this ID, this shard key's shard, or
 * this logical shard.
 * @example
 * ```ts
 * import type { ShardTarget } from '@shardflake/kysely'
 *
 * const byId: ShardTarget = { id: '7342519581384302598' }
 * const byKey: ShardTarget = { key: 'ada@example.com' }
 * const byShard: ShardTarget = { shard: 17 }
 * ```
 */
export type ShardTarget =
  | { readonly id: IdInput }
  | { readonly key: ShardKey }
  | { readonly shard: number }

/**
 * The Kysely instances of an application whose rows are spread over several servers, one per
 * server, routed by core's `ShardHomes`. Made by {@link shardedKysely}.
 *
 * - {@link insertInto} is Kysely's own insert builder: `.values(rows)` gives the rows their IDs,
 *   then `.execute()` sends one INSERT per server holding some of them, at once.
 * - {@link forId}, {@link forKey}, {@link forShard} and {@link forServer} give one server's
 *   Kysely for anything else (selects, updates, deletes): a read by ID goes to one server.
 * - {@link transaction} runs on one server.
 * - {@link fanOut} is the only way to query several servers.
 *
 * Every Kysely it hands out (and every transaction opened on one) refuses to insert a row whose
 * shard lives on another server, or to update or delete one by an ID of another server:
 * `WrongServerError`, before the query is sent.
 * @example
 * ```ts
 * import type { ShardedId, ShardedKysely } from '@shardflake/kysely'
 * declare const sharded: ShardedKysely<{ posts: { id: ShardedId; author_id: string; title: string } }>
 * declare const postId: string
 *
 * const post = await sharded
 *   .forId(postId)
 *   .selectFrom('posts')
 *   .selectAll()
 *   .where('id', '=', postId)
 *   .executeTakeFirst()
 * ```
 */
export class ShardedKysely<DB = AnyDatabase> {
  /** The routing this uses: the homes of the logical shards, and a Kysely per server. */
  readonly homes: ShardHomes<Kysely<DB>>
  readonly #guarded: ReadonlyMap<string, Kysely<DB>>
  readonly #router: Kysely<DB>

  /** @internal Made by {@link shardedKysely}. */
  constructor(
    homes: ShardHomes<Kysely<DB>>,
    guarded: ReadonlyMap<string, Kysely<DB>>,
    router: Kysely<DB>,
  ) {
    this.homes = homes
    this.#guarded = guarded
    this.#router = router
  }

  /** The application's sharding. */
  get sharding(): Sharding {
    return this.homes.sharding
  }

  /**
   * Kysely's insert builder, routed: `.values(rows)` gives every new row its ID (its rule, or the
   * ID you gave it), and `.execute()` splits the rows by the server holding their shard, one
   * INSERT per server, sent at once. While a shard is being moved, waits for the move to finish
   * (core's `writeGroups`). With `.returning(...)`, the rows come back in the order of `values`
   * (only the rows written, with a conflict clause). The rows of several servers are not one
   * transaction: if a server fails, the rows of the others are written, and the call throws that
   * server's error.
   * @throws ConfigurationError for a table not declared in `shardedIds({ tables })`.
   * @throws InvalidArgumentError for `INSERT ... SELECT`, or a key given as SQL.
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeGroups`.
   * @example
   * ```ts
   * import type { ShardedId, ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: ShardedId; author_id: string; title: string } }>
   * declare const adaId: string, bobId: string
   *
   * const posts = await sharded
   *   .insertInto('posts')
   *   .values([
   *     { author_id: adaId, title: 'hello' },
   *     { author_id: bobId, title: 'world' },
   *   ])
   *   .returning('id')
   *   .execute()
   * ```
   */
  insertInto<T extends keyof DB & string>(table: T): InsertQueryBuilder<DB, T, InsertResult> {
    return this.#router.insertInto(table)
  }

  /**
   * `REPLACE INTO` (MySQL, MariaDB), routed like {@link insertInto}.
   * @example
   * ```ts
   * import type { ShardedId, ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ keyed: { id: ShardedId; shard_key: string } }>
   *
   * await sharded.replaceInto('keyed').values({ shard_key: '30' }).execute()
   * ```
   */
  replaceInto<T extends keyof DB & string>(table: T): InsertQueryBuilder<DB, T, InsertResult> {
    return this.#router.replaceInto(table)
  }

  /**
   * The Kysely of the server holding the row with this ID.
   * @throws InvalidIdError for a value that is not an ID; DirectoryStaleError as core's `forId`.
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ comments: { id: string; post_id: string; body: string } }>
   * declare const postId: string
   *
   * const comments = await sharded
   *   .forId(postId)
   *   .selectFrom('comments')
   *   .select('body')
   *   .where('post_id', '=', postId)
   *   .execute()
   * ```
   */
  forId(id: IdInput): Kysely<DB> {
    return this.forServer(this.homes.serverOf(this.sharding.shardOfId(id)))
  }

  /**
   * The Kysely of the server holding a shard key's shard.
   * @throws MissingShardKeyError for `null` or `undefined`.
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ authors: { id: string; email: string } }>
   *
   * const ada = await sharded
   *   .forKey('ada@example.com')
   *   .selectFrom('authors')
   *   .selectAll()
   *   .where('email', '=', 'ada@example.com')
   *   .executeTakeFirst()
   * ```
   */
  forKey(key: ShardKey): Kysely<DB> {
    return this.forServer(this.homes.serverOf(this.sharding.shardForKey(key)))
  }

  /**
   * The Kysely of the server holding a logical shard.
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: string; title: string } }>
   *
   * const some = await sharded.forShard(17).selectFrom('posts').select('title').limit(10).execute()
   * ```
   */
  forShard(shard: number): Kysely<DB> {
    return this.forServer(this.homes.serverOf(shard))
  }

  /**
   * The Kysely of a server by its name.
   * @throws ConfigurationError for a name not among the servers.
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: string; title: string } }>
   *
   * await sharded.forServer('a').deleteFrom('posts').where('title', '=', '').execute()
   * ```
   */
  forServer(server: string): Kysely<DB> {
    return this.#guarded.get(server) ?? this.homes.handleOf(server)
  }

  /**
   * A transaction on the server holding `where` (an ID, a shard key or a logical shard), begun
   * once any move of that shard has finished: Kysely's `db.transaction()` there. Inside it, a
   * row of a shard living on another server is refused with `WrongServerError` before it is
   * sent, and the transaction is rolled back: there are no transactions across servers.
   * @throws WrongServerError, from `execute`, for a row of another server.
   * @throws ShardMovingError, DirectoryStaleError (retryable) as core's `writeHome`.
   * @example
   * ```ts
   * import type { ShardedId, ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: ShardedId; author_id: string; title: string } }>
   * declare const authorId: string
   *
   * await sharded.transaction({ id: authorId }).execute(async (trx) => {
   *   await trx.insertInto('posts').values({ author_id: authorId, title: 'one' }).execute()
   *   await trx.insertInto('posts').values({ author_id: authorId, title: 'two' }).execute()
   * })
   * ```
   */
  transaction(where: ShardTarget): RoutedTransactionBuilder<DB> {
    const shard = this.#shardOfTarget(where)
    return {
      execute: async <R>(run: (trx: Transaction<DB>) => Promise<R>): Promise<R> => {
        if (typeof run !== 'function') {
          throw new InvalidArgumentError(
            'transaction().execute() takes a function of the transaction.',
          )
        }
        const { server } = await this.homes.writeHome(shard)
        return this.forServer(server).transaction().execute(run)
      },
    }
  }

  /**
   * A `where` condition: the ID in `column` is of one of `shards`. Give it to the query of a
   * {@link fanOut}, with the shards each server is asked about, so that a server never answers
   * for old copies of a shard that was moved away from it.
   * @throws ShardOutOfRangeError for a shard outside the logical shards.
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: string; title: string } }>
   *
   * const newest = await sharded.fanOut(
   *   (db, _server, shards) =>
   *     db
   *       .selectFrom('posts')
   *       .select(['id', 'title'])
   *       .where(sharded.inShards('id', shards))
   *       .orderBy('id', 'desc')
   *       .limit(20)
   *       .execute(),
   *   { orderBy: (post) => post.id, order: 'desc', limit: 20 },
   * )
   * ```
   */
  inShards(column: string, shards: readonly number[]): RawBuilder<SqlBool> {
    if (typeof column !== 'string' || column === '') {
      throw new InvalidArgumentError(
        `inShards() takes the name of the ID column, got ${describeValue(column)}.`,
      )
    }
    if (!Array.isArray(shards)) {
      throw new InvalidArgumentError(
        `inShards() takes an array of logical shards, got ${describeValue(shards)}.`,
      )
    }
    const list = [...new Set(shards.map((shard) => this.sharding.checkShard(shard)))]
    if (list.length === 0) return sql<SqlBool>`1 = 0`
    const { layout } = this.sharding
    const mask = 2 ** layout.shardBits - 1
    return sql<SqlBool>`((${sql.ref(column)} >> ${sql.lit(layout.shifts.shard)}) & ${sql.lit(mask)}) in (${sql.join(list.map((shard) => sql.lit(shard)))})`
  }

  /**
   * Runs a query on the Kysely of every server (or of the servers holding `options.shards`) and
   * merges the rows: with `orderBy` (the row's ID) in ID order, stopping at `limit`. The only way
   * to read from several servers. See core's `ShardHomes.fanOut`.
   * @throws FanOutError when a server's query failed (`results`: what the others returned).
   * @example
   * ```ts
   * import type { ShardedKysely } from '@shardflake/kysely'
   * declare const sharded: ShardedKysely<{ posts: { id: string; title: string } }>
   *
   * const counts = await sharded.fanOut(async (db, server) => [
   *   { server, ...(await db.selectFrom('posts').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()) },
   * ])
   * ```
   */
  fanOut<R>(run: FanOutRun<Kysely<DB>, R>, options?: FanOutOptions<R>): Promise<R[]> {
    if (typeof run !== 'function') return this.homes.fanOut(run, options) // its typed refusal
    return this.homes.fanOut<R>(
      (_db, server, shards, signal) => run(this.forServer(server), server, shards, signal),
      options,
    )
  }

  #shardOfTarget(where: ShardTarget): number {
    if (typeof where === 'object' && where !== null) {
      if ('id' in where) return this.sharding.shardOfId(where.id)
      if ('key' in where) return this.sharding.shardForKey(where.key)
      if ('shard' in where) return this.sharding.checkShard(where.shard)
    }
    throw new InvalidArgumentError(
      `A transaction needs the server it runs on: { id }, { key } or { shard }, got ${describeValue(where)}.`,
    )
  }
}

/**
 * What {@link ShardedKysely.transaction} returns: like Kysely's `TransactionBuilder`, its
 * `execute` runs the callback in a transaction, here on the server the target names.
 * @example
 * ```ts
 * import type { ShardedKysely } from '@shardflake/kysely'
 * declare const sharded: ShardedKysely
 *
 * await sharded.transaction({ shard: 17 }).execute(async (trx) => trx.selectFrom('posts').selectAll().execute())
 * ```
 */
export interface RoutedTransactionBuilder<DB> {
  execute<R>(run: (trx: Transaction<DB>) => Promise<R>): Promise<R>
}

/**
 * Routes an application's Kysely instances, one per server, by core's `ShardHomes`: give
 * `ShardHomes.open` the Kysely instances as `servers`, each with the `shardedIds()` plugin (and
 * its dialect, for an asynchronous source) drawing from the application's one source. Returns
 * the router: see {@link ShardedKysely}. The instances you gave `ShardHomes` are not guarded:
 * write through the router, or the instances it hands out.
 * @throws InvalidArgumentError when `homes` is not a `ShardHomes`.
 * @throws ConfigurationError when a server's Kysely has no `shardedIds()` plugin, two servers
 * share one Kysely, or a plugin's source makes IDs of another sharding (or of none).
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { type ShardedId, shardedIds, shardedKysely } from '@shardflake/kysely'
 * import { Kysely, PostgresDialect } from 'kysely'
 * import pg from 'pg'
 *
 * interface Database {
 *   posts: { id: ShardedId; author_id: string; title: string }
 * }
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const ids = shardedIds<Database>({
 *   source: new InProcessSource({ sharding, shards: 'all' }),
 *   tables: { posts: { sameShardAs: 'author_id' } },
 * })
 * const open = (url: string) =>
 *   new Kysely<Database>({
 *     dialect: ids.dialect(new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) })),
 *     plugins: [ids],
 *   })
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: open('postgres://db-a/app'), b: open('postgres://db-b/app') },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const sharded = shardedKysely(homes)
 * ```
 */
export function shardedKysely<DB>(homes: ShardHomes<Kysely<DB>>): ShardedKysely<DB> {
  if (!(homes instanceof ShardHomes)) {
    throw new InvalidArgumentError(
      `shardedKysely() takes the ShardHomes of your Kysely instances: ShardHomes.open({ sharding, servers: { a: dbA, ... }, directory }), got ${describeValue(homes)}.`,
    )
  }
  const { sharding } = homes
  const seen = new Map<Kysely<DB>, string>()
  const guarded = new Map<string, Kysely<DB>>()
  let first: { db: Kysely<DB>; routing: PluginRouting } | undefined
  for (const server of homes.serverNames) {
    const db = homes.handleOf(server)
    if (!(db instanceof KyselyClass)) {
      throw new ConfigurationError(
        `The handle of server ${JSON.stringify(server)} is not a Kysely instance (got ${describeValue(db)}): give ShardHomes one Kysely per server.`,
      )
    }
    const other = seen.get(db)
    if (other !== undefined) {
      throw new ConfigurationError(
        `Servers ${JSON.stringify(other)} and ${JSON.stringify(server)} have the same Kysely instance: give each server a Kysely of its own.`,
      )
    }
    seen.set(db, server)
    const plugins = db.getExecutor().plugins
    const at = plugins.findIndex((plugin) => plugin instanceof ShardedIdsPlugin)
    const ids = plugins[at] as ShardedIdsPlugin<unknown> | undefined
    if (!ids) {
      throw new ConfigurationError(
        `The Kysely of server ${JSON.stringify(server)} has no shardedIds() plugin: create every server's Kysely with { dialect: ids.dialect(...), plugins: [ids] }.`,
      )
    }
    const sourceSharding = ids.source.sharding
    if (!sourceSharding) {
      throw new ConfigurationError(
        `The source of server ${JSON.stringify(server)}'s shardedIds() makes IDs without a shard: rows cannot be placed by their ID. Use a source of the application's sharding.`,
      )
    }
    sharding.checkSame(sourceSharding, `The source of server ${JSON.stringify(server)}`)
    const routing = routingOf(ids)
    first ??= { db, routing }
    // The guard right after the plugin that fills the keys: it reads names as your queries do.
    const guard = new HomeGuardPlugin(homes, server, routing)
    const ordered = [...plugins.slice(0, at + 1), guard, ...plugins.slice(at + 1)]
    guarded.set(
      server,
      ordered.reduce((each, plugin) => each.withPlugin(plugin), db.withoutPlugins()),
    )
  }
  if (!first) throw new ConfigurationError('shardedKysely() needs at least one server.')
  const router = routerOf(homes, first.db, first.routing)
  return new ShardedKysely(homes, guarded, router)
}

/**
 * The plugin on every Kysely the router hands out: refuses, before the query is sent, a new row
 * whose shard lives on another server, and an UPDATE or DELETE naming a row by an ID of another
 * server. Runs after `shardedIds()`, so it sees every key.
 */
class HomeGuardPlugin implements KyselyPlugin {
  constructor(
    private readonly homes: ShardHomes<unknown>,
    private readonly server: string,
    private readonly routing: PluginRouting,
  ) {}

  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    this.check(node)
    return node
  }

  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result
  }

  private check(node: RootOperationNode): void {
    const withNode = (node as { readonly with?: WithNode }).with
    for (const cte of withNode?.expressions ?? []) {
      if (QUERY_KINDS.has(cte.expression.kind)) this.check(cte.expression as RootOperationNode)
    }
    const { sharding } = this.homes
    switch (node.kind) {
      case 'InsertQueryNode': {
        const placement = this.routing.placementOf(node.into)
        if (placement) {
          for (const shard of new Set(rowShards(node, placement, this.routing, sharding))) {
            this.homes.checkHome(this.server, shard)
          }
        }
        return
      }
      case 'MergeQueryNode': {
        const merge = node as MergeQueryNode
        const placement = this.routing.placementOf(merge.into)
        if (!placement) return
        for (const when of merge.whens ?? []) {
          if (when.result?.kind !== 'InsertQueryNode') continue
          for (const shard of new Set(
            rowShards(when.result as InsertQueryNode, placement, this.routing, sharding),
          )) {
            this.homes.checkHome(this.server, shard)
          }
        }
        return
      }
      case 'UpdateQueryNode':
      case 'DeleteQueryNode': {
        const table = node.kind === 'UpdateQueryNode' ? node.table : node.from.froms[0]
        const placement =
          node.kind === 'DeleteQueryNode' && node.from.froms.length !== 1
            ? undefined
            : this.routing.placementOf(table)
        if (!placement || !node.where) return
        for (const id of namedIds(node.where.where, placement.spec.column)) {
          if (id === null || id === undefined) continue
          this.homes.checkHome(this.server, sharding.shardOfId(toBigInt(id as IdInput)))
        }
        return
      }
      default:
        return
    }
  }
}

const QUERY_KINDS = new Set([
  'InsertQueryNode',
  'UpdateQueryNode',
  'DeleteQueryNode',
  'MergeQueryNode',
])

/**
 * The logical shard of every row of an INSERT into a declared table: as the plugin placed them
 * when it filled the keys of this very node (its last), else read from each row's key (an ID,
 * or the shard of a pending one), e.g. when a later plugin changed the node.
 * @throws InvalidArgumentError for INSERT ... SELECT, or a key given as SQL: its shard cannot
 * be known before the query runs.
 */
function rowShards(
  node: InsertQueryNode,
  placement: Placement,
  routing: PluginRouting,
  sharding: Sharding,
): readonly number[] {
  return routing.takePlacedShards(node) ?? keyShards(node, placement, sharding)
}

/** The logical shard of every row of an INSERT, read from its key: see {@link rowShards}. */
function keyShards(node: InsertQueryNode, placement: Placement, sharding: Sharding): number[] {
  const { column, name } = placement.spec
  const values = node.values
  if (!values) return [] // no rows (the plugin turned `default values` into a row)
  if (values.kind !== 'ValuesNode') {
    throw new InvalidArgumentError(
      `INSERT INTO ${name} ... SELECT through a routed Kysely: which server holds its rows is not known before it runs. Select the rows first, then insert them with .values().`,
    )
  }
  const keyIndex = (node.columns ?? []).findIndex((c) => c.column.name === column)
  const shift = BigInt(sharding.layout.shifts.shard)
  const mask = (1n << BigInt(sharding.layout.shardBits)) - 1n
  return (values as ValuesNode).values.map((row: ValuesItemNode) => {
    const key = keyIndex < 0 ? undefined : keyOf(row, keyIndex)
    if (key instanceof PendingId) return key.shard
    if (key === SQL_EXPRESSION || key === undefined || key === null) {
      throw new InvalidArgumentError(
        `A row of ${name} has its key '${column}' given as SQL, so which server holds it is not known before the query runs. Give the ID itself (ids.assign() makes them).`,
      )
    }
    // The plugin made or checked every bigint key: read its shard bits (checked by the caller).
    if (typeof key === 'bigint') return Number((key >> shift) & mask)
    return sharding.shardOfId(toBigInt(key as IdInput, `${name}.${column}`))
  })
}

/** The value of a row's key column; a default is `undefined`, SQL is {@link SQL_EXPRESSION}. */
function keyOf(row: ValuesItemNode, index: number): unknown {
  if (row.kind === 'PrimitiveValueListNode') return row.values[index]
  const node = row.values[index]
  if (node === undefined || node.kind === 'DefaultInsertValueNode') return undefined
  return node.kind === 'ValueNode' ? (node as ValueNode).value : SQL_EXPRESSION
}

/**
 * The router's own Kysely: the first server's executor (its plugins, compiler and adapter), its
 * connections replaced by the one connection that splits each INSERT into one per server, sent
 * through each server's Kysely. Handed out without a driver's acquire and release: that
 * connection holds nothing.
 */
function routerOf<DB>(
  homes: ShardHomes<Kysely<DB>>,
  first: Kysely<DB>,
  routing: PluginRouting,
): Kysely<DB> {
  const executor = first.getExecutor()
  const connection = new RoutingConnection(homes, routing, executor.adapter)
  const provider: ConnectionProvider = {
    provideConnection: (consumer) => consumer(connection),
  }
  const driver: Driver = {
    init: async () => undefined,
    acquireConnection: async () => connection,
    releaseConnection: async () => undefined,
    destroy: async () => undefined,
    beginTransaction: async () => {
      throw new ConfigurationError(
        'The router runs no transactions: a transaction runs on one server, sharded.transaction({ id }).execute(...).',
      )
    },
    commitTransaction: async () => undefined,
    rollbackTransaction: async () => undefined,
  }
  const dialect: Dialect = {
    createDriver: () => driver,
    createAdapter: () => executor.adapter,
    createQueryCompiler: () => ({
      compileQuery: (node, queryId) => executor.compileQuery(node, queryId),
    }),
    createIntrospector: () => first.introspection,
  }
  return new KyselyClass<DB>({
    config: { dialect },
    dialect,
    driver,
    executor: executor.withConnectionProvider(provider),
  })
}

type AbortOptions = Parameters<DatabaseConnection['executeQuery']>[1]

/** The router's connection: each INSERT split by server, one statement per server. */
class RoutingConnection<DB> implements DatabaseConnection {
  constructor(
    private readonly homes: ShardHomes<Kysely<DB>>,
    private readonly routing: PluginRouting,
    /** The adapter of the Kysely whose compiler compiles the router's queries. */
    private readonly adapter: DialectAdapter,
  ) {}

  executeQuery<R>(compiled: CompiledQuery, options?: AbortOptions): Promise<QueryResult<R>> {
    try {
      return this.route<R>(compiled, options)
    } catch (error) {
      return Promise.reject(error)
    }
  }

  /** Sends `compiled` to its rows' servers: at once when one server takes it all without a wait. */
  private route<R>(compiled: CompiledQuery, options: AbortOptions): Promise<QueryResult<R>> {
    const node = compiled.query
    if (node.kind !== 'InsertQueryNode') {
      throw new InvalidArgumentError(
        `The router sends inserts only, got a ${node.kind}: use sharded.forId(id), forKey(key) or forShard(shard) for one server, sharded.fanOut() for every server.`,
      )
    }
    const placement = this.routing.placementOf(node.into)
    if (!placement) {
      throw new ConfigurationError(
        'This table has no sharded key (it is not declared in shardedIds({ tables })), so nothing says which server holds its rows: insert them through one server, sharded.forShard(shard) or sharded.forServer(name).',
      )
    }
    const { sharding } = this.homes
    const shards = rowShards(node, placement, this.routing, sharding)
    if (shards.length === 0) {
      throw new InvalidArgumentError(`An INSERT INTO ${placement.spec.name} without rows.`)
    }
    const unique = distinctShards(shards)
    if (unique.length === 1) {
      // One shard: its home (waiting while it is being moved), the INSERT as it is.
      const home = this.homes.writeHomeNow(unique[0]!, options?.signal)
      if (home) return this.send<R>(home.handle, compiled, undefined, options)
      return this.homes
        .writeHome(unique[0]!, options?.signal)
        .then(({ handle }) => this.send<R>(handle, compiled, undefined, options))
    }
    return this.split<R>(compiled, shards, unique, options)
  }

  /** The rows of each of the distinct shards' servers (waiting while any moves), sent at once. */
  private async split<R>(
    compiled: CompiledQuery,
    shards: readonly number[],
    unique: readonly number[],
    options: AbortOptions,
  ): Promise<QueryResult<R>> {
    const homesOf = await this.homes.writeGroups(unique, (shard) => shard, options?.signal)
    if (homesOf.size === 1) {
      const { handle } = homesOf.values().next().value!
      return this.send<R>(handle, compiled, undefined, options)
    }
    const serverOf = new Map<number, string>()
    for (const [server, { items }] of homesOf)
      for (const shard of items) serverOf.set(shard, server)
    const byServer = new Map<string, number[]>()
    shards.forEach((shard, index) => {
      const server = serverOf.get(shard)!
      const items = byServer.get(server)
      if (items) items.push(index)
      else byServer.set(server, [index])
    })
    const groups = [...byServer]
    const settled = await Promise.allSettled(
      groups.map(([server, items]) =>
        this.send<R>(homesOf.get(server)!.handle, compiled, items, options),
      ),
    )
    const failed = settled.find((result) => result.status === 'rejected')
    if (failed) throw failed.reason
    const results = settled.map(
      (result) => (result as PromiseFulfilledResult<QueryResult<R>>).value,
    )
    return merge(
      results,
      groups.map(([, items]) => items),
      shards.length,
    )
  }

  /**
   * Sends an INSERT (`items`: the indexes of its rows that go to this server; all of them when
   * `undefined`) through a server's Kysely: the query as compiled when every row goes there and
   * that server compiles alike, else compiled there.
   */
  private send<R>(
    handle: Kysely<DB>,
    compiled: CompiledQuery,
    items: readonly number[] | undefined,
    options: AbortOptions,
  ): Promise<QueryResult<R>> {
    const executor = handle.getExecutor()
    const node = compiled.query as InsertQueryNode
    let query: CompiledQuery<R>
    if (items === undefined) {
      query =
        executor.adapter.constructor === this.adapter.constructor
          ? (compiled as CompiledQuery<R>)
          : executor.compileQuery<R>(node, createQueryId())
    } else {
      const rows = (node.values as ValuesNode).values
      query = executor.compileQuery<R>(
        Object.freeze({
          ...node,
          values: Object.freeze({
            kind: 'ValuesNode',
            values: Object.freeze(items.map((index) => rows[index]!)),
          }) as ValuesNode,
        }),
        createQueryId(),
      )
    }
    return executor.provideConnection(
      (connection) => connection.executeQuery<R>(query, options),
      options,
    )
  }

  // biome-ignore lint/correctness/useYield: refuses before streaming anything
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new InvalidArgumentError(
      'The router sends inserts only: stream from one server, sharded.forId(id).selectFrom(...).stream().',
    )
  }
}

/**
 * The results of one INSERT's parts as one: the returned rows in the order of the values (in
 * server order when a part returned another number of rows than it sent, e.g. with a conflict
 * clause), the counts summed, `insertId` when the INSERT had one row.
 */
function merge<R>(
  results: readonly QueryResult<R>[],
  positions: readonly (readonly number[])[],
  total: number,
): QueryResult<R> {
  const inOrder = results.every((result, i) => result.rows.length === positions[i]!.length)
  let rows: R[]
  if (inOrder) {
    rows = new Array<R>(total)
    results.forEach((result, i) => {
      positions[i]!.forEach((position, j) => {
        rows[position] = result.rows[j]!
      })
    })
    rows = results.some((result) => result.rows.length > 0) ? rows : []
  } else {
    rows = results.flatMap((result) => result.rows)
  }
  const sum = (pick: (result: QueryResult<R>) => bigint | undefined) =>
    results.some((result) => pick(result) !== undefined)
      ? results.reduce((n, result) => n + (pick(result) ?? 0n), 0n)
      : undefined
  const numAffectedRows = sum((result) => result.numAffectedRows)
  const numChangedRows = sum((result) => result.numChangedRows)
  const insertId = results.length === 1 ? results[0]!.insertId : undefined
  return {
    rows,
    ...(numAffectedRows !== undefined && { numAffectedRows }),
    ...(numChangedRows !== undefined && { numChangedRows }),
    ...(insertId !== undefined && { insertId }),
  }
}
