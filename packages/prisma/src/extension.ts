import { Prisma } from '@prisma/client/extension'
import {
  ConfigurationError,
  checkKnownOptions,
  type IdSource,
  InvalidArgumentError,
} from '@shardflake/core'
import { checkModels, type ModelMetadata, type ShardedModels } from './metadata'
import { type FindField, IdPlan } from './plan'
import { leaveHomeNote } from './routed-rows'
import type { NewRow } from './rows'

/** The one delegate method the extension calls to read a parent's ID. */
interface FindUnique {
  findUnique(args: {
    where: Record<string, unknown>
    select: Record<string, true>
  }): Promise<Record<string, unknown> | null>
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * True when `createManyAndReturn` returns the ID field (no `select` without it, no `omit` of it),
 * so its rows can be put back in the caller's order.
 */
function returnsField(args: unknown, field: string): boolean {
  if (!isRecord(args)) return false
  if (isRecord(args.select) && args.select[field] !== true) return false
  if (isRecord(args.omit) && args.omit[field] === true) return false
  return true
}

/** The model delegate (`client.post`) of a model name, when the client has one. */
function delegateOf(client: object, model: string): FindUnique | undefined {
  const delegate: unknown = Reflect.get(client, model.charAt(0).toLowerCase() + model.slice(1))
  return isFindUnique(delegate) ? delegate : undefined
}

function isFindUnique(value: unknown): value is FindUnique {
  return (
    typeof value === 'object' &&
    value !== null &&
    'findUnique' in value &&
    typeof value.findUnique === 'function'
  )
}

/**
 * Tells the router's home check, when it runs after this hook, the shards of the rows the router
 * placed (`rows`, in the order it meets them), with their IDs as passed on (`field` of each
 * row's data when given, else the ID).
 */
function leaveNote(request: object, rows: readonly NewRow[], field?: string) {
  if (rows.length === 0 || !rows.every((row) => row.verified)) return
  leaveHomeNote(request, {
    ids: rows.map((row) => (field === undefined ? row.id : row.data[field])),
    shards: rows.map((row) => row.shard!),
  })
}

/** The query hooks of every `shardedIds` extension (the router looks for them). */
const fillHooks = new WeakSet<object>()

/**
 * Whether `shardedIds`' hook is the last query hook an `operation` of `model` (its delegate's
 * name: `post`) runs on `client` (no other extension's hook after it can change the rows), read
 * from Prisma's list of the client's extensions (not in its public types). `false` when that list
 * cannot be read.
 */
export function endsWithShardedIds(client: unknown, model: string, operation: string): boolean {
  try {
    const extensions: unknown = Reflect.get(Object(client), '_extensions')
    const hooksOf: unknown = isRecord(extensions)
      ? Reflect.get(extensions, 'getAllQueryCallbacks')
      : undefined
    if (typeof hooksOf !== 'function') return false
    const hooks: unknown = hooksOf.call(extensions, model, operation)
    return Array.isArray(hooks) && hooks.length > 0 && fillHooks.has(hooks[hooks.length - 1])
  } catch {
    return false
  }
}

/** What Prisma passes a query hook, as far as the extension reads it. */
interface QueryHookParams<A, R> {
  model: string
  operation: string
  args: A
  query: (args: A) => PromiseLike<R>
  /**
   * Prisma's request, not in its public types, which every query hook of one query is handed:
   * read to know whether a transaction runs, and as the key of what this hook tells the router's
   * home check after it (without it, the home check reads every ID itself).
   */
  __internalParams?: { transaction?: unknown }
}

/** What {@link shardedIds} takes. */
export interface ShardedIdsOptions<M extends ShardedModels = ShardedModels> {
  /**
   * Where IDs come from: an `InProcessSource` (no round trip; the fastest with Prisma) or a
   * database source (`PostgresSource`, `MysqlSource`, ...), which uses its own connections, never
   * Prisma's, so interactive transactions cannot starve it. Its `sharding` (layout and logical
   * shards) decides where every key goes.
   */
  source: IdSource
  /**
   * The models: what the `shardflake` generator writes at `prisma generate`
   * (`import { models } from './generated/shardflake'`), or an object written by hand.
   * Required here because nothing public in Prisma's runtime carries the `///` rules; the
   * generated module also exports a `shardedIds` that passes them for you
   * (`import { shardedIds } from './generated/shardflake'`, then `shardedIds({ source })`).
   */
  models: M
}

/** The ID field of model `K`, as a type. */
type IdFieldOf<M extends ShardedModels, K extends keyof M> = M[K]['id'] extends string
  ? M[K]['id']
  : never

/** `prisma.$shardedIds`: assign IDs yourself, before `createMany`. */
export interface ShardedIdsClient<M extends ShardedModels = ShardedModels> {
  /** The metadata the extension uses. */
  readonly models: M
  /** The source the extension asks for IDs (its `sharding` places every row). */
  readonly source: IdSource
  /**
   * Gives every row without an ID (and every nested create inside it) an ID, in place, one
   * source call per shard, and returns the same rows. Use it before `createMany`, which returns
   * only a count (and has no `createManyAndReturn` on MySQL/MariaDB), to learn the IDs.
   * @throws MissingShardKeyError when a row lacks its shard key (nothing is allocated).
   * @throws InvalidArgumentError for a model without a sharded ID (unknown, or not annotated).
   * @example
   * ```ts
   * const rows = await prisma.$shardedIds.assign('Post', [{ userId, title: 'a' }, { userId, title: 'b' }])
   * await prisma.post.createMany({ data: rows })
   * rows[0].id // 1387263000905318401n
   * ```
   */
  assign<K extends keyof M & string, T extends object>(
    model: K,
    rows: readonly T[],
  ): Promise<(T & { [F in IdFieldOf<M, K>]: bigint })[]>
}

/**
 * A Prisma client extension that gives every new row of a sharded model its 64-bit sharded ID
 * before the INSERT: `create`, `createMany`, `createManyAndReturn`, `upsert`, and every nested
 * `create`, `createMany`, `connectOrCreate` and `upsert` inside them and inside `update`. It
 * asks the source once per shard per operation (once per level when children go where a parent
 * made in the same call goes). An ID the caller gives is kept when it is on the shard its rule
 * gives (see `MisplacedIdError` below). Rules and shards come from
 * `source.sharding`, the application's `defineSharding(...)` (sources without one, ticket
 * servers, make plain IDs and rules do not apply).
 *
 * A child goes on the shard of the parent it is actually written under. When that parent is
 * named by something other than its ID (`connect: { email }`, an `update` by a unique field) or
 * by a `connectOrCreate`, the extension reads the parent's ID through the client it extends first,
 * and pins the write to what it read: the `where` gets the ID, a `connectOrCreate` becomes a
 * `connect` (the parent exists) or a `create` (it does not, and the child follows the created
 * parent). A parent changed in between makes Prisma fail the write; it never misplaces the child.
 *
 * Order of `$extends`: query extensions run in the order they were added. Add `shardedIds` after
 * an extension that fills fields of `data` (a tenant key the rule reads), and before one that
 * should see the IDs.
 *
 * Prisma hands extensions a copy of the arguments, so the caller learns the IDs from the result
 * (or assigns them first with `prisma.$shardedIds.assign`). In that copy, `createMany` and
 * `createManyAndReturn` get their IDs as decimal strings: Prisma checks them as 64-bit integers
 * and compiles those queries faster than with a `bigint` per row. The hook runs for `create`,
 * `createMany`, `createManyAndReturn`, `upsert` and `update` only: reads pass straight through.
 *
 * @example
 * ```ts
 * import { PrismaPg } from '@prisma/adapter-pg'
 * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
 * import { shardedIds } from '@shardflake/prisma'
 *
 * // PrismaClient (./generated/prisma/client) and models (./generated/shardflake): what
 * // `prisma generate` wrote. The generated module also has a `shardedIds` with `models` bound.
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) }).$extends(
 *   shardedIds({ source, models }),
 * )
 * const user = await prisma.user.create({ data: { email: 'ada@example.com' } })
 * sharding.shardOfId(user.id) // sharding.shardForKey('ada@example.com')
 * ```
 * @throws MissingShardKeyError (per operation) when a new row lacks its shard key, before
 *   anything is allocated or written.
 * @throws UnsafeNumberError when a sharded ID, shard key or key to a sharded ID is a `number`
 *   above 2^53 (it has lost digits already: pass a bigint).
 * @throws InvalidShardRuleError (at once) for a rule that does not mean what it says, such as
 *   `shardBy` on a key that holds a sharded parent's ID.
 * @throws InvalidArgumentError (at once) for an unknown option, naming the closest.
 * @throws MisplacedIdError (per operation) when an ID you give a new row is on another shard than
 *   its rule gives (its key's, its parent's): nothing allocated or written. Inside
 *   `trustSuppliedIds(() => ...)` (imports) it is kept.
 * @throws ShardKeyChangedError (per operation) when an `update` or `upsert` writes a stored row's
 *   shard key or parent so that its rule gives another shard than its ID's (the row is found by
 *   its `where`, read first when it is not by ID).
 */
export function shardedIds<const M extends ShardedModels>(options: ShardedIdsOptions<M>) {
  checkKnownOptions('shardedIds() options', options, ['source', 'models'])
  const { source } = options
  if (!source || typeof source.nextIds !== 'function') {
    throw new ConfigurationError(
      "shardedIds needs `source`: an IdSource made with the application's sharding (new InProcessSource({ sharding, shards }), a PostgresSource, ...).",
    )
  }
  const models = checkModels(options.models)
  if (!source.sharding) {
    const tagged = Object.entries(models).find(([, model]) => model.rule?.shardColumn)
    if (tagged) {
      throw new ConfigurationError(
        `Model ${tagged[0]} has the shard column '${tagged[1].rule!.shardColumn}', but the source makes plain IDs (ticket servers) that carry no shard. Use a source with a layout, or drop shardColumn.`,
      )
    }
  }

  return Prisma.defineExtension((client) => {
    const find: FindField = async (model, where, field) => {
      const delegate = delegateOf(client, model)
      if (!delegate) throw new ConfigurationError(`The Prisma client has no model ${model}.`)
      const row = await delegate.findUnique({ where, select: { [field]: true } })
      return row?.[field] ?? undefined
    }

    const $shardedIds: ShardedIdsClient<M> = {
      models,
      source,
      async assign(model, rows) {
        const meta: ModelMetadata | undefined = Object.hasOwn(models, model)
          ? models[model]
          : undefined
        if (meta?.id === undefined) {
          const sharded = Object.keys(models).filter((name) => models[name]!.id !== undefined)
          throw new InvalidArgumentError(
            `${JSON.stringify(model)} is not a model with a sharded ID (one with /// @shardedId). Those are: ${sharded.join(', ') || 'none'}. Re-run prisma generate after changing the schema.`,
          )
        }
        const plan = new IdPlan(models).rowsOf(model, rows)
        if (!plan.empty) await plan.assign(source, find)
        return rows as ((typeof rows)[number] & { [F in IdFieldOf<M, typeof model>]: bigint })[]
      },
    }

    const fill = async <A, R>(params: QueryHookParams<A, R>) => {
      const { model, operation, args, query } = params
      const plan = new IdPlan(models).operation(model, operation, args)
      if (source.sharding) plan.adoptRouted(source.sharding)
      const request = params.__internalParams
      if (!plan.empty) await plan.assign(source, find, request?.transaction !== undefined)
      const many = operation === 'createMany' || operation === 'createManyAndReturn'
      const noted = typeof request === 'object' && plan.homeChecked
      if (!many) {
        if (noted) leaveNote(request, plan.placedRows())
        return query(args)
      }
      // Rows in ID order: the INSERT appends to the primary key's B-tree instead of splitting
      // its pages (rows of interleaved shards leave InnoDB leaf pages about half full).
      const field = models[model ?? '']?.id
      const data = isRecord(args) ? args.data : undefined
      const sorted =
        field !== undefined && (operation === 'createMany' || returnsField(args, field))
          ? plan.sortedById(data)
          : undefined
      plan.writeIdsAsText()
      if (noted) {
        const rows = sorted?.rows ?? (Array.isArray(data) ? plan.rowsOfData(data) : undefined)
        if (rows) leaveNote(request, rows, field)
      }
      if (!sorted) return query(args)
      ;(args as Record<string, unknown>).data = sorted.sorted
      const result = await query(args)
      if (operation === 'createMany' || !Array.isArray(result)) return result
      // createManyAndReturn: the rows come back in the order the caller gave them.
      const byId = new Map<string, unknown>()
      for (const row of result as unknown[]) {
        if (isRecord(row)) byId.set(String(row[field!]), row)
      }
      if (byId.size !== result.length) return result
      const restored = (data as unknown[]).map((item) =>
        byId.get(String((item as Record<string, unknown>)[field!])),
      )
      return (restored.every((row) => row !== undefined) ? restored : result) as R
    }

    fillHooks.add(fill)
    return client.$extends({
      name: '@shardflake/prisma',
      client: { $shardedIds },
      // Only the operations that can create rows: reads and the rest skip the hook (and the copy
      // of their arguments Prisma makes for every query hook).
      query: {
        $allModels: {
          create: fill,
          createMany: fill,
          createManyAndReturn: fill,
          upsert: fill,
          update: fill,
        },
      },
    })
  })
}
