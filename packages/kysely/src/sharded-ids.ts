import {
  ConfigurationError,
  checkKnownOptions,
  type IdSource,
  InvalidArgumentError,
  isSyncSource,
  toBigInt,
  toSigned64,
} from '@shardflake/core'
import {
  type DatabaseConnection,
  type Dialect,
  type DialectAdapter,
  type Insertable,
  type InsertQueryNode,
  isOperationNodeSource,
  type KyselyPlugin,
  type OperationNode,
  type PluginTransformQueryArgs,
  type PluginTransformResultArgs,
  type QueryResult,
  type RootOperationNode,
  type UnknownRow,
  type ValuesNode,
} from 'kysely'
import { allocate } from './allocate'
import { shardedDialect } from './dialect'
import { checkForeignKeys } from './foreign-keys'
import { PendingId } from './pending-id'
import { Placement, type RowValues, SQL_EXPRESSION } from './placement'
import { type InsertFiller, readRow, rewriteQuery, tableOf } from './rewrite'
import { readTables, type ShardedTable, type TableSpec } from './tables'

/**
 * What a router reads from a plugin: the placement of the declared table a node names
 * (`undefined` for a table that is not declared), and the shards of the rows of the INSERT the
 * plugin filled last, once, if it is `node` (`undefined` for any other node: one a later plugin
 * changed, or one filled before the last).
 * @internal
 */
export interface PluginRouting {
  placementOf(into: OperationNode | undefined): Placement | undefined
  takePlacedShards(node: InsertQueryNode): readonly number[] | undefined
}

const routings = new WeakMap<object, () => PluginRouting>()

/**
 * What a router reads from `plugin`; from then on the plugin keeps the shards of the rows of
 * the last INSERT it filled, so that a router reading them in the same step (Kysely compiles a
 * query and hands it to the connection without waiting in between) places the rows without
 * reading their IDs again.
 * @internal
 */
export function routingOf(plugin: ShardedIdsPlugin<unknown>): PluginRouting {
  return routings.get(plugin)!()
}

/** Any database, for applications that do not give `shardedIds` their `DB` type. */
export type AnyDatabase = Record<string, Record<string, unknown>>

/** The `tables` option: each table with a sharded key, by the name your queries use. */
export type ShardedTables<DB = AnyDatabase> = {
  readonly [T in keyof DB & string]?: ShardedTable<Insertable<DB[T]>>
}

/** What {@link shardedIds} takes. */
export interface ShardedIdsOptions<DB = AnyDatabase> {
  /**
   * Where IDs come from: any `IdSource`. Its `sharding` decides every shard. A synchronous
   * source (`InProcessSource`, `LeasedSource`) fills keys while Kysely compiles the query; an
   * asynchronous one (`PostgresSource`, `MysqlSource`, `RedisSource`, `TicketServerSource`)
   * needs the dialect from {@link ShardedIdsPlugin.dialect}, which fills them as the query runs.
   */
  readonly source: IdSource
  /** The tables whose key the plugin fills, with their shard rules. */
  readonly tables: ShardedTables<DB>
}

/** Rows from {@link ShardedIdsPlugin.assign}: each with its key column (`C`, `'id'` unless told) set. */
export type Assigned<R, C extends string = 'id'> = R & { [K in C]: bigint }

/**
 * The Kysely plugin that gives every new row of a declared table its 64-bit sharded key before
 * the INSERT: `db.insertInto('posts').values(rows)` inserts each row with an ID on the shard its
 * rule gives, one `nextIds` call per shard. Make it with {@link shardedIds}.
 */
export class ShardedIdsPlugin<DB = AnyDatabase> implements KyselyPlugin {
  /** The source IDs come from. */
  readonly source: IdSource
  readonly #placements = new Map<string, Placement>()
  readonly #filler: InsertFiller
  #wrapped = false
  /** The last INSERT node this plugin returned and the shards of its rows, until a router reads them. */
  #placedNode: InsertQueryNode | undefined
  #placedShards: readonly number[] | undefined

  /** @throws InvalidShardRuleError, ShardOutOfRangeError, InvalidArgumentError, ConfigurationError */
  constructor(options: ShardedIdsOptions<NoInfer<DB>>) {
    checkKnownOptions('shardedIds()', options, ['source', 'tables'])
    const source: unknown = options.source
    if (
      typeof source !== 'object' ||
      source === null ||
      typeof (source as IdSource).nextIds !== 'function'
    ) {
      throw new ConfigurationError(
        'shardedIds() needs a source: an IdSource such as new InProcessSource({ sharding, shards: "all" }) or a PostgresSource.',
      )
    }
    this.source = source as IdSource
    for (const [name, spec] of readTables(options.tables, this.source.sharding)) {
      this.#placements.set(name, new Placement(spec, this.source.sharding))
    }
    this.#filler = {
      placementOf: (into) => this.#placementOf(into),
      fill: (shards) => this.#fill(shards),
    }
    routings.set(this, () => this.#routing())
  }

  /**
   * Fills the key column of every new row of a declared table (see {@link shardedIds}). Kysely
   * calls it for every query, synchronously, when it compiles it.
   */
  transformQuery({ node }: PluginTransformQueryArgs): RootOperationNode {
    return rewriteQuery(node, this.#filler)
  }

  /** Results pass through unchanged. */
  async transformResult({ result }: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
    return result
  }

  /**
   * Your dialect, with connections that fill pending IDs just before a query is sent (needed for
   * an asynchronous source), give a one-row INSERT its ID as `insertId`, and check the tables'
   * foreign keys against the rules when Kysely first connects.
   *
   * @example
   * ```ts
   * import { defineSharding, instagram } from '@shardflake/core'
   * import { shardedIds } from '@shardflake/kysely'
   * import { PostgresSource } from '@shardflake/postgres'
   * import { Kysely, PostgresDialect } from 'kysely'
   * import pg from 'pg'
   *
   * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
   * const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL })
   * const ids = shardedIds({
   *   source: new PostgresSource({ sharding, databases: pool, prefetch: { size: 100 } }),
   *   tables: { posts: { sameShardAs: 'author_id' } },
   * })
   * const db = new Kysely<Record<string, Record<string, unknown>>>({
   *   dialect: ids.dialect(new PostgresDialect({ pool })),
   *   plugins: [ids],
   * })
   * ```
   */
  dialect(inner: Dialect): Dialect {
    this.#wrapped = true
    return shardedDialect(inner, {
      insertIdOf: (node, filled) => this.#insertIdOf(node, filled),
      checkTables: (connection, adapter) => this.#checkTables(connection, adapter),
    })
  }

  /**
   * Gives rows their IDs before you insert them, with any source: ascending in row order from an
   * in-process or leased source when its time window allows, else one `nextIds` call per shard.
   * Use it when you need the IDs first (MySQL has no `RETURNING`; children that reference a new
   * parent). Rows that have an ID keep it, checked against the rule like in an INSERT. Returns
   * copies of the rows with the key column set (a `bigint`); `C` names it when it is not `id`.
   *
   * @throws MissingShardKeyError, InvalidArgumentError before any ID is allocated
   * @example
   * ```ts
   * import type { ShardedIdsPlugin } from '@shardflake/kysely'
   * import type { Kysely } from 'kysely'
   * declare const ids: ShardedIdsPlugin
   * declare const db: Kysely<Record<string, Record<string, unknown>>>
   * declare const authorId: string
   *
   * const [post] = await ids.assign('posts', [{ author_id: authorId, title: 'hello' }])
   * const comments = await ids.assign('comments', [{ post_id: post!.id, body: 'first' }])
   * await db.insertInto('posts').values(post!).execute()
   * await db.insertInto('comments').values(comments).execute()
   * ```
   */
  async assign<R extends object, C extends string = 'id'>(
    table: keyof DB & string,
    rows: readonly R[],
  ): Promise<Assigned<R, C>[]>
  async assign<R extends object, C extends string = 'id'>(
    table: keyof DB & string,
    row: R,
  ): Promise<Assigned<R, C>>
  async assign<R extends object, C extends string = 'id'>(
    table: keyof DB & string,
    rows: R | readonly R[],
  ): Promise<Assigned<R, C> | Assigned<R, C>[]> {
    const placement = this.#placements.get(table)
    if (!placement) {
      throw new InvalidArgumentError(
        `assign(${JSON.stringify(table)}): the table is not declared in shardedIds({ tables }).`,
      )
    }
    const list: readonly R[] = Array.isArray(rows) ? rows : [rows as R]
    const { column } = placement.spec
    const { shardColumn } = placement
    const missing: number[] = []
    const shards: number[] = []
    const shardValues = new Map<number, number>()
    list.forEach((row, index) => {
      const values = valuesOf(row)
      const id = values[column]
      let shard: number | undefined
      if (id === undefined || id === null) {
        shard = placement.shardOf(values)
        shards.push(shard)
        missing.push(index)
      } else if (id !== SQL_EXPRESSION) {
        shard = placement.sharding?.layout.shardOf(placement.checkId(values, id))
      }
      // The shard column holds the ID's shard: checked before any ID is made.
      if (shardColumn !== undefined && shard !== undefined) {
        if (placement.checkShardColumn(values[shardColumn], shard)) shardValues.set(index, shard)
      }
    })
    const ids = await allocate(this.source, shards)
    const copies = list.map((row) => ({ ...row }) as Record<string, unknown>)
    missing.forEach((index, i) => {
      copies[index]![column] = toSigned64(ids[i]!)
    })
    for (const [index, shard] of shardValues) copies[index]![shardColumn!] = shard
    const assigned = copies as Assigned<R, C>[]
    return Array.isArray(rows) ? assigned : assigned[0]!
  }

  #routing(): PluginRouting {
    this.#filler.placed ??= (node, shards) => {
      this.#placedNode = node
      this.#placedShards = shards
    }
    return {
      placementOf: (into) => this.#placementOf(into),
      takePlacedShards: (node) => {
        if (node !== this.#placedNode) return undefined
        const shards = this.#placedShards
        this.#placedNode = undefined
        this.#placedShards = undefined
        return shards
      },
    }
  }

  #placementOf(into: OperationNode | undefined): Placement | undefined {
    const target = tableOf(into)
    if (!target) return undefined
    const { schema, table } = target
    return (
      (schema === undefined ? undefined : this.#placements.get(`${schema}.${table}`)) ??
      this.#placements.get(table)
    )
  }

  /** Keys for new rows: IDs from a synchronous source, else pending IDs the dialect fills. */
  #fill(shards: readonly number[]): readonly unknown[] {
    const source = this.source
    if (isSyncSource(source)) {
      return allocate(source, shards).map(toSigned64)
    }
    if (!this.#wrapped) {
      throw new ConfigurationError(
        `The source of shardedIds() is asynchronous, so IDs are filled when the query runs, by the dialect shardedIds() returns: create Kysely with { dialect: ids.dialect(new PostgresDialect(...)), plugins: [ids] }. Nothing was written.`,
      )
    }
    return shards.map((shard) => new PendingId(shard, source))
  }

  #insertIdOf(node: RootOperationNode, filled: ReadonlyMap<PendingId, bigint>): bigint | undefined {
    if (node.kind !== 'InsertQueryNode' || node.values?.kind !== 'ValuesNode') return undefined
    if (node.onConflict || node.onDuplicateKey || node.orAction || node.replace || node.explain) {
      return undefined // the row written may be another one, or none
    }
    const rows = (node.values as ValuesNode).values
    const placement = this.#placementOf(node.into)
    if (!placement || rows.length !== 1) return undefined
    const names = (node.columns ?? []).map((column) => column.column.name)
    const value = readRow(rows[0]!, names)[placement.spec.column]
    if (value instanceof PendingId) return filled.get(value)
    if (value === SQL_EXPRESSION || value === undefined || value === null) return undefined
    return toSigned64(toBigInt(value))
  }

  #checkTables(connection: DatabaseConnection, adapter: DialectAdapter): Promise<void> {
    return checkForeignKeys(connection, adapter, (name) => this.#specOf(name))
  }

  #specOf(name: string): TableSpec | undefined {
    const dot = name.lastIndexOf('.')
    return (
      this.#placements.get(name)?.spec ??
      (dot < 0 ? undefined : this.#placements.get(name.slice(dot + 1))?.spec)
    )
  }
}

/**
 * The Kysely plugin that gives every new row of the declared tables a 64-bit, time-ordered,
 * sharded key before the INSERT, placed by the table's shard rule (its own key, its parent's
 * ID, or a fixed shard), from any shardflake source.
 *
 * - Rows without a key get one: the key column is added to the INSERT when the query has none,
 *   or filled where a row leaves it out (`undefined`, `null`). A multi-row INSERT's IDs ascend in
 *   row order when the source can (in-process, leased), else one `nextIds` call per shard.
 * - An ID you give a row is kept, after checking it is on the shard the rule gives.
 * - A synchronous source fills keys while Kysely compiles (`.compile()` shows them); an
 *   asynchronous one needs the dialect from {@link ShardedIdsPlugin.dialect}.
 * - Refused before anything is written or allocated: a row without its key or parent
 *   (`MissingShardKeyError`), INSERT ... SELECT without the key column, and `defaultValues()`
 *   unless the table has a fixed shard.
 * - An upsert by ID, or an UPDATE naming its rows by key, that would move a stored row's key
 *   (or parent) to another shard is refused (`ShardKeyChangedError`): an ID never changes shard.
 *
 * List it before plugins that rename columns (`CamelCasePlugin`): rules name columns as your
 * queries do.
 *
 * @throws InvalidShardRuleError, ShardOutOfRangeError, InvalidArgumentError for bad tables or options
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
 * import { shardedIds } from '@shardflake/kysely'
 * import { Kysely, PostgresDialect } from 'kysely'
 * import pg from 'pg'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const ids = shardedIds({
 *   source: new InProcessSource({ sharding, shards: 'all' }),
 *   tables: { users: { shardBy: 'email' }, posts: { sameShardAs: 'author_id' } },
 * })
 * const db = new Kysely<Record<string, Record<string, unknown>>>({
 *   dialect: ids.dialect(new PostgresDialect({ pool: new pg.Pool() })),
 *   plugins: [ids],
 * })
 * ```
 */
export function shardedIds<DB = AnyDatabase>(
  options: ShardedIdsOptions<NoInfer<DB>>,
): ShardedIdsPlugin<DB> {
  return new ShardedIdsPlugin(options)
}

/** A row given to `assign`, read the way the plugin reads an INSERT's values. */
function valuesOf(row: object): RowValues {
  const values: RowValues = Object.create(null)
  for (const [column, value] of Object.entries(row)) {
    values[column] =
      typeof value === 'function' || isOperationNodeSource(value) ? SQL_EXPRESSION : value
  }
  return values
}
