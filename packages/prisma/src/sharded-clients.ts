import { Prisma } from '@prisma/client/extension'
import {
  ConfigurationError,
  checkKnownOptions,
  describeValue,
  type FanOutOptions,
  type FanOutRun,
  type IdInput,
  type IdSource,
  InvalidArgumentError,
  ShardHomes,
  type Sharding,
  type ShardKey,
  WrongServerError,
} from '@shardflake/core'
import { endsWithShardedIds } from './extension'
import type { ModelMetadata, ShardedModels } from './metadata'
import { type FindField, IdPlan } from './plan'
import { markRouted, notedShards, routedShard } from './routed-rows'
import type { NewRow } from './rows'
import { type Data, isObject, isScalar, list } from './walk'

/** What a server's client must be: a Prisma client extended with `shardedIds`. */
export interface ShardedIdsHost {
  readonly $shardedIds: { readonly models: ShardedModels; readonly source: IdSource }
}

/** The model methods {@link shardedClients} routes by the row's shard. */
type RoutedOperation =
  | 'create'
  | 'createMany'
  | 'createManyAndReturn'
  | 'upsert'
  | 'findUnique'
  | 'findUniqueOrThrow'
  | 'update'
  | 'delete'

/**
 * A model of {@link ShardedClients}: the model's own methods, each sent to the server its rows
 * live on, and `findManyEverywhere`, the one that asks every server.
 */
export type RoutedDelegate<D> = { readonly [K in Extract<keyof D, RoutedOperation>]: D[K] } & {
  /**
   * `findMany` on every server, merged newest first (or oldest first with
   * `orderBy: { id: 'asc' }`), at most `take` rows in all. Only the ID can order the merge: any
   * other `orderBy`, `skip`, `cursor` or `distinct` is refused.
   */
  readonly findManyEverywhere: D extends { findMany: infer F } ? F : never
}

/** The model delegates of a Prisma client type (`post`, `user`, ...). */
type ModelKeys<C> = {
  [K in keyof C]: K extends `$${string}`
    ? never
    : C[K] extends { findMany: unknown; create: unknown }
      ? K
      : never
}[keyof C]

/**
 * One object for every server's Prisma client, from {@link shardedClients}: `db.post.create`
 * writes on the server of the new row's shard, `db.forId(id)` is the client of the server
 * holding a row, `db.post.findManyEverywhere` and `db.fanOut` ask every server.
 */
export type ShardedClients<C> =
  IsAny<C> extends true
    ? // biome-ignore lint/suspicious/noExplicitAny: an untyped client routes untyped
      any
    : RoutedClients<C>

/** `true` for `any`: a client whose type is unknown gives an untyped router. */
type IsAny<T> = 0 extends 1 & T ? true : false

/** {@link ShardedClients} of a typed client. */
type RoutedClients<C> = { readonly [K in ModelKeys<C>]: RoutedDelegate<C[K]> } & {
  /** The shard homes the clients were made with. */
  readonly homes: ShardHomes<C>
  /**
   * `shardedIds`' helper, across servers: `db.$shardedIds.assign('Post', rows)` gives the rows
   * their IDs before `db.post.createMany` (which returns only a count), reading any parent it
   * needs from the server that holds it.
   */
  readonly $shardedIds: C extends { $shardedIds: infer S } ? S : never
  /**
   * The client of the server holding the row with this ID, for reads, updates and
   * transactions there. Its writes are checked: a new row of another server is refused with
   * `WrongServerError` before anything is written.
   */
  forId(id: IdInput): C
  /** The client of the server holding a shard key's shard; checked as {@link forId}'s. */
  forKey(key: ShardKey): C
  /** The client of the server holding a logical shard; checked as {@link forId}'s. */
  forShard(shard: number): C
  /** The client of a server by its name; checked as {@link forId}'s. */
  forServer(server: string): C
  /**
   * Runs a query on every server (or those holding `options.shards`) with its checked client,
   * and merges the rows: core's `ShardHomes.fanOut`.
   */
  fanOut<R>(run: FanOutRun<C, R>, options?: FanOutOptions<R>): Promise<R[]>
}

/** What {@link shardedClients} takes. */
export interface ShardedClientsOptions<C> {
  /**
   * The shard homes, opened with one Prisma client per server, each extended with `shardedIds`
   * (the same `source` and models).
   */
  readonly homes: ShardHomes<C>
}

/** A model delegate as the router calls it. */
type Delegate = Record<string, (args?: unknown) => Promise<unknown>>
/** How the router sends a create to one server: see `writerOf`. */
interface Writer {
  readonly delegate: Delegate
  readonly homeChecked: boolean
}

const delegateKey = (model: string) => model.charAt(0).toLowerCase() + model.slice(1)

/**
 * Routes a Prisma application whose rows are spread over several database servers. Give it the
 * `ShardHomes` opened with one Prisma client per server (each extended with `shardedIds`), and
 * use the object it returns like a client:
 *
 * - **Writes go home.** `db.post.create` gives the new row (and its nested rows) IDs, then
 *   writes it on the server holding its shard. `createMany` and `createManyAndReturn` split the
 *   rows by server, one call per server at once: the counts are summed, the rows come back in
 *   your order. A write whose rows would land on two servers is refused (`WrongServerError`).
 * - **Reads by ID or key go to one server.** `db.post.findUnique({ where: { id } })`,
 *   `update` and `delete` go to the server of the ID (or of the shard key, for a `shardBy`
 *   rule); `db.forId(id)` / `db.forKey(key)` give that server's client for anything else,
 *   `include` and transactions included.
 * - **Asking every server is explicit.** `db.post.findManyEverywhere({ where, take })` merges
 *   every server's newest rows by ID; `db.fanOut(run)` runs your own query on each.
 *
 * Every client it hands out refuses to write a new row whose shard lives on another server
 * (`WrongServerError`, before the query runs), inside `$transaction` too: a transaction runs on
 * one server, and nothing is ever written across servers silently. There are no joins or
 * transactions across servers.
 *
 * @throws InvalidArgumentError for options that are not valid.
 * @throws ConfigurationError when a server's client is not extended with `shardedIds`, or its
 *   source has another sharding than the homes.
 * @example
 * ```ts
 * import { PrismaPg } from '@prisma/adapter-pg'
 * import { defineSharding, InProcessSource, instagram, ShardHomes, ShardMap } from '@shardflake/core'
 * import { shardedClients, shardedIds } from '@shardflake/prisma'
 *
 * // PrismaClient and models: what `prisma generate` wrote (./generated/prisma/client and
 * // ./generated/shardflake). One client per server, each extended with shardedIds.
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const source = new InProcessSource({ sharding, shards: 'all' })
 * const client = (url: string) =>
 *   new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }).$extends(
 *     shardedIds({ source, models }),
 *   )
 * const homes = await ShardHomes.open({
 *   sharding,
 *   servers: { a: client('postgres://db-a/app'), b: client('postgres://db-b/app') },
 *   directory: new ShardMap(sharding, [
 *     { from: 0, to: 31, target: 'a' },
 *     { from: 32, to: 63, target: 'b' },
 *   ]),
 * })
 * const db = shardedClients({ homes })
 * const user = await db.user.create({ data: { email: 'ada@example.com', posts: { create: { title: 'hi' } } } })
 * const again = await db.user.findUnique({ where: { id: user.id }, include: { posts: true } })
 * await db.forId(user.id).$transaction(async (tx) => tx.post.create({ data: { userId: user.id, title: 'x' } }))
 * const newest = await db.post.findManyEverywhere({ take: 20 })
 * ```
 */
export function shardedClients<C extends ShardedIdsHost>(
  options: ShardedClientsOptions<C>,
): ShardedClients<C> {
  checkKnownOptions('shardedClients() options', options, ['homes'])
  const { homes } = options
  if (!(homes instanceof ShardHomes)) {
    throw new InvalidArgumentError(
      `shardedClients needs homes: the ShardHomes opened with one Prisma client per server (ShardHomes.open({ sharding, servers, directory })), got ${describeValue(homes)}.`,
    )
  }
  const sharding = homes.sharding
  let models: ShardedModels | undefined
  let source: IdSource | undefined
  const checked = new Map<string, C>()
  for (const server of homes.serverNames) {
    const client = homes.handleOf(server)
    const ids = (client as Partial<ShardedIdsHost>).$shardedIds
    if (!isObject(ids) || !isObject(ids.models) || !ids.source) {
      throw new ConfigurationError(
        `The client of server ${JSON.stringify(server)} is not extended with shardedIds: give ShardHomes each server's client as new PrismaClient({ adapter }).$extends(shardedIds({ source })).`,
      )
    }
    models ??= ids.models
    source ??= ids.source
    const its = ids.source.sharding
    if (its) sharding.checkSame(its, `The source of server ${JSON.stringify(server)}'s client`)
    checked.set(server, withHomeCheck(client, server, homes, ids.models))
  }
  const allModels = models!
  const idSource = source!
  const clientOf = (server: string): C => {
    const client = checked.get(server)
    if (!client) return homes.handleOf(server) // throws ConfigurationError naming the servers
    return client
  }
  const delegateOf = (client: C, model: string) =>
    Reflect.get(client, delegateKey(model)) as Delegate
  /**
   * The client a create of the router is sent through: the server's own client when
   * `shardedIds`' hook is the last query hook it runs for the operation, else the checked one.
   * Every new row of the create was placed by the router and found on that server by
   * `writeHome` or `writeGroups` (waiting while a shard moves), from the reading the home check
   * would consult a few microtasks later: with nothing after `shardedIds` to change the rows, the
   * check would read the same homes again, at the cost of one more query hook (Prisma copies a
   * query's arguments for each). Kept per server, model and operation; `homeChecked` tells which.
   */
  const writers = new Map<string, Map<string, Map<string, Writer>>>()
  const writerOf = (server: string, model: string, operation: string): Writer => {
    let byModel = writers.get(server)
    if (!byModel) {
      byModel = new Map()
      writers.set(server, byModel)
    }
    let byOperation = byModel.get(model)
    if (!byOperation) {
      byOperation = new Map()
      byModel.set(model, byOperation)
    }
    let writer = byOperation.get(operation)
    if (!writer) {
      const own = homes.handleOf(server)
      writer = endsWithShardedIds(own, delegateKey(model), operation)
        ? { delegate: delegateOf(own, model), homeChecked: false }
        : { delegate: delegateOf(clientOf(server), model), homeChecked: true }
      byOperation.set(operation, writer)
    }
    return writer
  }

  /** Reads `field` of the row matching `where` on the server it routes to, or on every one. */
  const findEverywhere: FindField = async (model, where, field) => {
    const shard = shardOfWhere(allModels, sharding, model, where)
    const servers = shard === undefined ? homes.serverNames : [homes.serverOf(shard)]
    const found = await Promise.all(
      servers.map((server) =>
        delegateOf(clientOf(server), model).findUnique!({ where, select: { [field]: true } }),
      ),
    )
    for (const row of found) if (isObject(row) && row[field] != null) return row[field]
    return undefined
  }

  const metaOf = (model: string, what: string): ModelMetadata & { id: string } => {
    const meta = Object.hasOwn(allModels, model) ? allModels[model] : undefined
    if (meta?.id === undefined) {
      throw new InvalidArgumentError(
        `${model} has no sharded ID (no /// @shardedId), so nothing says which server its rows are on: ${what} it through one server's client (db.forShard(shard), db.forKey(key), db.forServer(name)).`,
      )
    }
    return meta as ModelMetadata & { id: string }
  }

  /** Gives every new row its ID; returns the rows, in the order the server's hook will see them. */
  const place = async (model: string, operation: string, args: Data) => {
    const plan = new IdPlan(allModels).operation(model, operation, args)
    await plan.assign(idSource, findEverywhere)
    return plan.placedRows()
  }

  /**
   * Sends one server the rows placed for it: the server's hook takes their placement instead of
   * placing them again (`routed-rows.ts`), while they are in flight. `homeChecked`: the client
   * runs the home check after that hook.
   */
  const send = async (
    rows: readonly NewRow[],
    homeChecked: boolean,
    write: () => Promise<unknown>,
  ) => {
    const forget = idSource.sharding ? markRouted(idSource.sharding, rows, homeChecked) : undefined
    try {
      return await write()
    } finally {
      forget?.()
    }
  }

  /** The one server of a single write's rows; refuses rows that would span servers. */
  const oneServer = async (model: string, rows: readonly NewRow[]) => {
    if (rows.length === 1) {
      const shard = routedShard(sharding, rows[0]!)
      return (homes.writeHomeNow(shard) ?? (await homes.writeHome(shard))).server
    }
    const groups = await homes.writeGroups(rows, (row) => routedShard(sharding, row))
    if (groups.size !== 1) {
      const where = [...groups].map(
        ([server, group]) =>
          `${group.items.map((row) => row.model).join(', ')} on server ${server}`,
      )
      throw new WrongServerError(
        `This ${model} write would put its rows on several servers (${where.join('; ')}), and a write runs on one server. Nothing was written: keep nested rows on their parent's shard (sameShardAs), or write them separately.`,
      )
    }
    return [...groups.keys()][0]!
  }

  const create = async (model: string, args: unknown) => {
    metaOf(model, 'create')
    const copy = copyArgs(args, 'create')
    const rows = await place(model, 'create', copy)
    const { delegate, homeChecked } = writerOf(await oneServer(model, rows), model, 'create')
    return send(rows, homeChecked, () => delegate.create!(copy))
  }

  const upsert = async (model: string, args: unknown) => {
    metaOf(model, 'upsert')
    const copy = copyArgs(args, 'upsert')
    const rows = (await place(model, 'upsert', copy)).filter((row) => row.id !== undefined)
    const where = isObject(copy.where) ? copy.where : {}
    const shard = shardOfWhere(allModels, sharding, model, where)
    let server: string
    if (rows.length > 0) {
      server = await oneServer(model, rows)
      // The stored row is found on that server only: it must be its home too.
      if (shard !== undefined) homes.checkHome(server, shard)
    } else {
      server = (await homes.writeHome(routeShard(model, where, 'upsert'))).server
    }
    const delegate = delegateOf(clientOf(server), model)
    return send(rows, true, () => delegate.upsert!(copy))
  }

  const createMany = async (model: string, args: unknown, returning: boolean) => {
    const meta = metaOf(model, returning ? 'createManyAndReturn' : 'createMany')
    const operation = returning ? 'createManyAndReturn' : 'createMany'
    const copy = copyArgs(args, operation)
    const items = list(copy.data)
    if (items.length === 0) return returning ? [] : { count: 0 }
    // One placed row per object of `data`, in its order.
    const rows = await place(model, operation, copy)
    // One row has one home: no grouping to do.
    const groups =
      rows.length === 1
        ? undefined
        : await homes.writeGroups(rows, (row) => routedShard(sharding, row))
    // Rows come back by ID, whatever the select: ask for it, drop it after.
    const { args: asked, added } = returning ? withId(copy, meta.id) : { args: copy, added: false }
    const writeGroup = (server: string, group: readonly NewRow[]) => {
      const { delegate, homeChecked } = writerOf(server, model, operation)
      return send(group, homeChecked, () =>
        delegate[operation]!({ ...asked, data: group.map((row) => row.data) }),
      )
    }
    let results: unknown[]
    if (!groups || groups.size === 1) {
      let server: string
      if (groups) server = groups.keys().next().value!
      else {
        const shard = routedShard(sharding, rows[0]!)
        server = (homes.writeHomeNow(shard) ?? (await homes.writeHome(shard))).server
      }
      results = [await writeGroup(server, rows)]
    } else {
      const settled = await Promise.allSettled(
        [...groups].map(([server, group]) => writeGroup(server, group.items)),
      )
      const failed = settled.find((result) => result.status === 'rejected')
      if (failed) throw failed.reason
      results = settled.map((result) => (result as PromiseFulfilledResult<unknown>).value)
    }
    if (!returning) {
      const count = results.reduce<number>(
        (sum, result) => sum + ((result as { count: number }).count ?? 0),
        0,
      )
      return { count }
    }
    const byId = new Map<string, Data>()
    for (const result of results) {
      for (const row of result as Data[]) byId.set(String(row[meta.id]), row)
    }
    const ordered: Data[] = []
    for (const row of rows) {
      const found = byId.get(String(row.id))
      if (!found) continue // skipDuplicates skipped it
      if (added) delete found[meta.id]
      ordered.push(found)
    }
    return ordered
  }

  /** The shard a `where` names, for a read or write of one stored row. */
  const routeShard = (model: string, where: unknown, operation: string): number => {
    const meta = metaOf(model, operation)
    const shard = isObject(where) ? shardOfWhere(allModels, sharding, model, where) : undefined
    if (shard === undefined) {
      const rule = meta.rule && !('shard' in meta.rule) ? meta.rule : undefined
      const key = rule && ('shardBy' in rule ? rule.shardBy : rule.sameShardAs)
      const keyed = typeof key === 'string' ? ` or ${key}` : ''
      throw new InvalidArgumentError(
        `${model}.${operation} needs where.${meta.id}${keyed} to know which server holds the row, got ${describeValue(where)}. To look on one server, use db.forKey(key) or db.forShard(shard); to look on every server, findManyEverywhere.`,
      )
    }
    return shard
  }

  const readOne = (model: string, operation: string) => async (args: unknown) => {
    const where = isObject(args) ? args.where : undefined
    const shard = routeShard(model, where, operation)
    return delegateOf(clientOf(homes.serverOf(shard)), model)[operation]!(args)
  }

  const writeOne = (model: string, operation: string) => async (args: unknown) => {
    const where = isObject(args) ? args.where : undefined
    const { server } = await homes.writeHome(routeShard(model, where, operation))
    return delegateOf(clientOf(server), model)[operation]!(args)
  }

  const findManyEverywhere = (model: string) => async (args: unknown) => {
    const meta = metaOf(model, 'findManyEverywhere')
    const given = args === undefined ? {} : args
    if (!isObject(given)) {
      throw new InvalidArgumentError(
        `findManyEverywhere takes findMany's arguments, got ${describeValue(args)}.`,
      )
    }
    for (const refused of ['skip', 'cursor', 'distinct']) {
      if (given[refused] !== undefined) {
        throw new InvalidArgumentError(
          `findManyEverywhere cannot take ${refused}: the rows of every server are merged by ${model}.${meta.id}. Page with where: { ${meta.id}: { lt: lastId } } instead.`,
        )
      }
    }
    const order = orderOf(given.orderBy, meta.id, model)
    const take = given.take
    if (take !== undefined && (!Number.isSafeInteger(take) || (take as number) < 0)) {
      throw new InvalidArgumentError(
        `findManyEverywhere takes a take of 0 or more rows, got ${describeValue(take)}.`,
      )
    }
    const { args: asked, added } = withId({ ...given, orderBy: { [meta.id]: order } }, meta.id)
    const id = meta.id
    // A server may still hold copies of shards moved away (deleted only on request), and a Prisma
    // where cannot test the shard bits of an ID: keep the rows of the shards asked about, and read
    // on past the copies until `take` rows of those shards are found or the server has no more.
    const readHomeRows = async (server: string, shards: readonly number[]): Promise<Data[]> => {
      const asked_ = new Set(shards)
      const delegate = delegateOf(clientOf(server), model)
      const kept: Data[] = []
      let page = asked
      for (;;) {
        const rows = (await delegate.findMany!(page)) as Data[]
        for (const row of rows) {
          if (asked_.has(sharding.shardOfId(row[id] as IdInput))) kept.push(row)
        }
        if (
          take === undefined ||
          rows.length < (take as number) ||
          kept.length >= (take as number)
        ) {
          return take === undefined ? kept : kept.slice(0, take as number)
        }
        const last = rows[rows.length - 1]![id]
        const after = { [id]: order === 'desc' ? { lt: last } : { gt: last } }
        const where = (asked as Data).where
        page = { ...(asked as Data), where: where === undefined ? after : { AND: [where, after] } }
      }
    }
    const rows = await homes.fanOut(
      (_client, server, shards) =>
        take === 0 ? Promise.resolve([]) : readHomeRows(server, shards),
      {
        orderBy: (row) => row[meta.id] as IdInput,
        order,
        ...(take !== undefined && { limit: take as number }),
      },
    )
    if (added) for (const row of rows) delete row[meta.id]
    return rows
  }

  const router: Record<string, unknown> = {
    homes,
    $shardedIds: Object.freeze({
      models: allModels,
      source: idSource,
      async assign(model: string, rows: readonly object[]) {
        metaOf(model, 'assign IDs to')
        const plan = new IdPlan(allModels).rowsOf(model, rows)
        if (!plan.empty) await plan.assign(idSource, findEverywhere)
        return rows
      },
    }),
    forId: (id: IdInput) => clientOf(homes.serverOf(sharding.shardOfId(id))),
    forKey: (key: ShardKey) => clientOf(homes.serverOf(sharding.shardForKey(key))),
    forShard: (shard: number) => clientOf(homes.serverOf(shard)),
    forServer: (server: string) => clientOf(server),
    fanOut: <R>(run: FanOutRun<C, R>, fanOutOptions?: FanOutOptions<R>) => {
      if (typeof run !== 'function') return homes.fanOut(run, fanOutOptions) // its typed refusal
      return homes.fanOut<R>(
        (_client, server, shards, signal) => run(clientOf(server), server, shards, signal),
        fanOutOptions,
      )
    },
  }
  for (const model of Object.keys(allModels)) {
    router[delegateKey(model)] = Object.freeze({
      create: (args: unknown) => create(model, args),
      createMany: (args: unknown) => createMany(model, args, false),
      createManyAndReturn: (args: unknown) => createMany(model, args, true),
      upsert: (args: unknown) => upsert(model, args),
      findUnique: readOne(model, 'findUnique'),
      findUniqueOrThrow: readOne(model, 'findUniqueOrThrow'),
      update: writeOne(model, 'update'),
      delete: writeOne(model, 'delete'),
      findManyEverywhere: findManyEverywhere(model),
    })
  }
  return Object.freeze(router) as ShardedClients<C>
}

/**
 * The client of one server, extended to refuse writing a new row (or changing a stored row by
 * ID) whose shard lives on another server. Runs after `shardedIds`, so it sees every ID.
 */
function withHomeCheck<C>(client: C, server: string, homes: ShardHomes<C>, models: ShardedModels) {
  const { sharding } = homes
  const check = async <A, R>({
    model,
    operation,
    args,
    query,
    __internalParams: request,
  }: {
    model: string
    operation: string
    args: A
    query: (args: A) => PromiseLike<R>
    /** Prisma's request object, shared by the query hooks of one query (not in its types). */
    __internalParams?: unknown
  }) => {
    const meta = Object.hasOwn(models, model) ? models[model] : undefined
    if (meta?.id !== undefined) {
      const field = meta.id
      const many = operation === 'createMany' || operation === 'createManyAndReturn'
      const rows = many ? undefined : new IdPlan(models).operation(model, operation, args).newRows()
      const noted = notedShards(request, () =>
        rows
          ? rows.map((row) => row.id)
          : list(isObject(args) ? args.data : undefined).map((item) =>
              isObject(item) ? item[field] : undefined,
            ),
      )
      if (noted) {
        // Rows the router placed, still holding the IDs the shardedIds hook passed on.
        const seen = new Set<number>()
        for (const shard of noted) {
          if (seen.has(shard)) continue
          seen.add(shard)
          homes.checkHome(server, shard)
        }
      } else {
        for (const row of rows ?? new IdPlan(models).operation(model, operation, args).newRows()) {
          homes.checkHome(server, sharding.shardOfId(row.id))
        }
      }
      const where = isObject(args) && isObject(args.where) ? args.where : undefined
      const id = where?.[meta.id]
      if (operation !== 'create' && isScalar(id)) {
        homes.checkHome(server, sharding.shardOfId(id as IdInput))
      }
    }
    return query(args)
  }
  const extension = Prisma.defineExtension({
    name: '@shardflake/prisma/home',
    query: {
      $allModels: {
        create: check,
        createMany: check,
        createManyAndReturn: check,
        upsert: check,
        update: check,
        delete: check,
      },
    },
  })
  return (client as unknown as { $extends(extension: unknown): C }).$extends(extension)
}

/**
 * The shard a unique `where` names without asking the database: its ID, or the key of a
 * `shardBy` / `sameShardAs` rule, or a fixed `shard`. `undefined` when it names none of them.
 */
function shardOfWhere(
  models: ShardedModels,
  sharding: Sharding,
  model: string,
  where: Data,
): number | undefined {
  const meta = Object.hasOwn(models, model) ? models[model] : undefined
  if (meta?.id === undefined) return undefined
  const id = where[meta.id]
  if (isScalar(id)) return sharding.shardOfId(id as IdInput)
  const rule = meta.rule
  if (!rule) return undefined
  if ('shard' in rule) return sharding.resolveShard(rule, where, model)
  const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof ref !== 'string' || !isScalar(where[ref])) return undefined
  return sharding.resolveShard(rule, { [ref]: where[ref] }, model)
}

/** The merge order of `findManyEverywhere`: by the ID only. */
function orderOf(orderBy: unknown, id: string, model: string): 'desc' | 'asc' {
  if (orderBy === undefined) return 'desc'
  const only = Array.isArray(orderBy) && orderBy.length === 1 ? orderBy[0] : orderBy
  if (
    isObject(only) &&
    Object.keys(only).length === 1 &&
    (only[id] === 'desc' || only[id] === 'asc')
  ) {
    return only[id]
  }
  throw new InvalidArgumentError(
    `findManyEverywhere merges every server's rows by ${model}.${id}, so it orders by { ${id}: 'desc' } (newest first, the default) or { ${id}: 'asc' } only, got ${describeValue(orderBy)}. Sort the merged rows yourself for another order.`,
  )
}

/** `args` with the ID selected; `added` when the caller's select or omit left it out. */
function withId(args: Data, id: string): { args: Data; added: boolean } {
  if (isObject(args.select) && args.select[id] !== true) {
    return { args: { ...args, select: { ...args.select, [id]: true } }, added: true }
  }
  if (isObject(args.omit) && args.omit[id] === true) {
    return { args: { ...args, omit: { ...args.omit, [id]: false } }, added: true }
  }
  return { args, added: false }
}

/** A copy of a call's arguments (plain objects and arrays; values such as Decimal kept as they are). */
function copyArgs(args: unknown, operation: string): Data {
  if (!isObject(args)) {
    throw new InvalidArgumentError(
      `${operation} takes an object of arguments ({ data: ... }), got ${describeValue(args)}.`,
    )
  }
  return copy(args) as Data
}

function copy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copy)
  if (typeof value !== 'object' || value === null) return value
  const proto: unknown = Object.getPrototypeOf(value)
  if (proto !== Object.prototype && proto !== null) return value
  const out: Data = {}
  for (const [key, item] of Object.entries(value)) out[key] = copy(item)
  return out
}
