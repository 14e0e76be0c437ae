import { Prisma } from '@prisma/client/extension'
import { type IdSource, InvalidArgumentError } from '@shardflake/core'
import { checkModels, type ShardedModels } from './metadata'
import { IdPlan } from './plan'

/** What Prisma passes a query hook, as far as the extension reads it. */
interface QueryHookParams<A, R> {
  model: string
  operation: string
  args: A
  query: (args: A) => PromiseLike<R>
}

/** What {@link shardedIds} takes. */
export interface ShardedIdsOptions<M extends ShardedModels = ShardedModels> {
  /**
   * Where IDs come from: an `InProcessSource` (no round trip; the fastest with Prisma) or a
   * database source (`PostgresSource`, `MysqlSource`, ...), which uses its own connections, never
   * Prisma's, so interactive transactions cannot starve it.
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
  /**
   * Gives every row without an ID (and every nested create inside it) an ID, in place, one
   * source call per shard, and returns the same rows. Use it before `createMany`, which returns
   * only a count (and has no `createManyAndReturn` on MySQL/MariaDB), to learn the IDs.
   * @throws MissingShardKeyError when a row lacks its shard key (nothing is allocated).
   * @throws InvalidArgumentError for a model the metadata does not know.
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
 * `create`, `createMany`, `connectOrCreate` and `upsert` inside them and inside `update`. It asks
 * the source once per shard per operation (once per level when children are sharded by a parent
 * ID made in the same call). An ID the caller gives is kept.
 *
 * Prisma hands extensions a copy of the arguments, so the caller learns the IDs from the result
 * (or assigns them first with `prisma.$shardedIds.assign`). In that copy, `createMany` and
 * `createManyAndReturn` get their IDs as decimal strings: Prisma checks them as 64-bit integers
 * and compiles those queries faster than with a `bigint` per row. The hook runs for `create`,
 * `createMany`, `createManyAndReturn`, `upsert` and `update` only: reads pass straight through.
 *
 * @example
 * ```ts
 * import { InProcessSource, instagram } from '@shardflake/core'
 * import { shardedIds } from '@shardflake/prisma'
 * import { PrismaPg } from '@prisma/adapter-pg'
 * import { PrismaClient } from './generated/prisma/client'
 * import { models } from './generated/shardflake'
 *
 * const source = new InProcessSource({ layout: instagram, shards: 'all', logicalShards: 2000 })
 * const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString }) })
 *   .$extends(shardedIds({ source, models }))
 * // the same, with the models bound by the generator:
 * // import { shardedIds } from './generated/shardflake'; .$extends(shardedIds({ source }))
 * const post = await prisma.post.create({ data: { userId: 31341n, title: 'hello' } })
 * post.id // 1387263000905318401n, on shard 31341 % 2000
 * ```
 * @throws MissingShardKeyError (per operation) when a new row lacks its shard key, before
 *   anything is allocated or written.
 * @throws UnsafeNumberError when a sharded ID, shard key or key to a sharded ID is a `number`
 *   above 2^53 (it has lost digits already: pass a bigint).
 */
export function shardedIds<const M extends ShardedModels>(options: ShardedIdsOptions<M>) {
  const { source } = options
  const models = checkModels(options.models)

  const $shardedIds: ShardedIdsClient<M> = {
    models,
    async assign(model, rows) {
      if (!Object.hasOwn(models, model)) {
        throw new InvalidArgumentError(
          `Unknown model ${JSON.stringify(model)}: the shardflake metadata has ${Object.keys(models).join(', ')}. Re-run prisma generate after changing the schema.`,
        )
      }
      const plan = new IdPlan(models).rowsOf(model, rows)
      if (!plan.empty) await plan.assign(source)
      return rows as ((typeof rows)[number] & { [F in IdFieldOf<M, typeof model>]: bigint })[]
    },
  }

  const fill = async <A, R>({ model, operation, args, query }: QueryHookParams<A, R>) => {
    const plan = new IdPlan(models).operation(model, operation, args)
    if (!plan.empty) await plan.assign(source)
    if (operation === 'createMany' || operation === 'createManyAndReturn') plan.writeIdsAsText()
    return query(args)
  }

  return Prisma.defineExtension({
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
}
