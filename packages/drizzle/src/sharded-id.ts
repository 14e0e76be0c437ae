import {
  ConfigurationError,
  checkShardRule,
  describeShardRule,
  type IdSource,
  isSyncSource,
  MissingShardKeyError,
  type Sharding,
  type ShardRule,
  shardColumnOf,
} from '@shardflake/core'

/** A row as Drizzle's `.values()` takes it: column keys (the table's property names) to values. */
export type Row = Record<string, unknown>

/**
 * Where a row of a sharded-ID column goes. The rules of every shardflake adapter, with the same
 * meaning and checks, naming the table's column keys (the property names of `pgTable(...)`):
 * - `{ shardBy: 'email' }` or `{ shardBy: (row) => key }`: a plain key (a tenant number, an
 *   email), `key mod logicalShards`, strings hashed;
 * - `{ sameShardAs: 'postId' }` or `{ sameShardAs: (row) => parentId }`: the foreign key that
 *   holds a sharded parent's ID; the row goes to the shard inside that ID;
 * - `{ shard: 3 }`: always shard 3;
 * - `{ shard: () => n }`: a shard that does not come from the row, asked each time an ID is
 *   made, e.g. the tenant of the request from an `AsyncLocalStorage`.
 *
 * Any of them may add `shardColumn: 'lshard'`: an integer column that receives the logical shard
 * of each row's ID, for engines that route by a column value (Citus, Vitess, PgDog).
 *
 * `shardBy` and `sameShardAs` read the row, which Drizzle's `$defaultFn` never sees: rows of such
 * a table (and of a table with a `shardColumn`) get their IDs from {@link ShardedIds.assign}
 * before `.values(rows)`. `shard` needs no
 * row, so `$defaultFn` can serve it too (from a synchronous source).
 */
export type ShardedIdRule = ShardRule<Row> | { readonly shard: () => number | undefined }

/** How `shardedIds()` bound a column: its source, its name and the type of its values. */
export interface ColumnBinding {
  readonly source: IdSource
  /** `posts.id`, for messages. */
  readonly where: string
  /** `assign` call to name in messages: `ids.assign(posts, rows)`. */
  readonly table: string
  /** What the column's rows carry: `bigint` (`mode: 'bigint'`) or a decimal string (`mode: 'string'`). */
  readonly mode: 'bigint' | 'string'
  /** Who bound it, to refuse a second binding while the first is open. */
  readonly owner: object
}

/** What {@link shardedId} records for a column. */
export interface ShardedIdSpec {
  readonly rule: ShardedIdRule
  binding: ColumnBinding | undefined
}

/** Drizzle column builders whose `$defaultFn` returns `T` (what the column carries). */
export interface DefaultFnColumn<T> {
  $defaultFn(fn: () => T): unknown
}

/**
 * Where a `shardedId()` default function carries its spec: a global symbol, so that a schema
 * loaded through one copy of this package (CommonJS) is recognized by another (ESM).
 */
const SPEC = Symbol.for('@shardflake/drizzle:shardedId')

/**
 * Makes a Drizzle `bigint` column a sharded ID: a 64-bit, time-ordered key that names its row's
 * logical shard, made before the INSERT. Wrap the dialect's own builder, in `mode: 'bigint'`
 * (or `mode: 'string'` on Drizzle 1.0), and chain the rest as usual:
 *
 * - rows given to `await ids.assign(table, rows)` before `.values(rows)` get their IDs by the
 *   rule, from any source (one round trip per shard for a database source);
 * - rows that reach `.values()` without an ID get one from the column's `$defaultFn`, which can
 *   only serve a `{ shard }` rule from a synchronous source (`InProcessSource`, `LeasedSource`):
 *   for a per-row rule or an asynchronous source it refuses the insert with a typed error
 *   instead of guessing a shard.
 *
 * The source is given once, for the whole schema, by {@link shardedIds}.
 *
 * @param column `bigint('id', { mode: 'bigint' })` of `drizzle-orm/pg-core` or
 * `drizzle-orm/mysql-core` (`mode: 'number'` is refused by the types: IDs pass 2^53 twelve days
 * after the epoch).
 * @example
 * ```ts
 * import { shardedId } from '@shardflake/drizzle'
 * import { bigint, pgTable, text } from 'drizzle-orm/pg-core'
 *
 * export const users = pgTable('users', {
 *   id: shardedId(bigint({ mode: 'bigint' }), { shardBy: 'email' }).primaryKey(),
 *   email: text().notNull().unique(),
 * })
 * export const posts = pgTable('posts', {
 *   id: shardedId(bigint({ mode: 'bigint' }), { sameShardAs: 'userId' }).primaryKey(),
 *   userId: bigint({ mode: 'bigint' }).notNull().references(() => users.id),
 *   title: text().notNull(),
 * })
 * ```
 */
export function shardedId<B extends DefaultFnColumn<bigint>>(
  column: B,
  rule: ShardedIdRule,
): ReturnType<B['$defaultFn']>
export function shardedId<B extends DefaultFnColumn<string>>(
  column: B,
  rule: ShardedIdRule,
): ReturnType<B['$defaultFn']>
export function shardedId(
  column: DefaultFnColumn<bigint> | DefaultFnColumn<string>,
  rule: ShardedIdRule,
): unknown {
  if (typeof column?.$defaultFn !== 'function') {
    throw new ConfigurationError(
      "shardedId() wraps a Drizzle column builder: shardedId(bigint('id', { mode: 'bigint' }), rule).",
    )
  }
  const spec: ShardedIdSpec = {
    rule: checkRuleShape(rule, 'a shardedId() column'),
    binding: undefined,
  }
  const defaultId = Object.assign((): bigint | string => nextDefault(spec), { [SPEC]: spec })
  // The builder calls the function back with the value its mode carries: nextDefault returns
  // what the bound column's mode says.
  return (column as DefaultFnColumn<bigint | string>).$defaultFn(defaultId)
}

/**
 * Throws unless `rule` is exactly one of `shardBy`, `sameShardAs`, `shard` (core's check, which
 * also takes a function for `shard` here: a shard from the caller's scope).
 * @throws InvalidShardRuleError
 */
export function checkRuleShape(rule: unknown, entityName: string): ShardedIdRule {
  const scoped =
    typeof rule === 'object' &&
    rule !== null &&
    typeof (rule as { shard?: unknown }).shard === 'function'
  checkShardRule(scoped ? { ...rule, shard: 0 } : rule, entityName)
  return rule as ShardedIdRule
}

/** The spec of a column made with {@link shardedId}, found by its `defaultFn`. */
export function specOf(column: { readonly defaultFn?: unknown }): ShardedIdSpec | undefined {
  const fn = column.defaultFn
  return typeof fn === 'function' ? (Reflect.get(fn, SPEC) as ShardedIdSpec | undefined) : undefined
}

/** True for a rule that reads the row (`shardBy`, `sameShardAs`). */
export function readsRow(rule: ShardedIdRule): rule is Exclude<ShardRule<Row>, { shard: number }> {
  return !('shard' in rule)
}

/**
 * The shard of a rule that needs no row: the fixed one, or the scope's.
 * @throws MissingShardKeyError when a scope function gives no shard.
 */
export function shardWithoutRow(
  rule: { readonly shard: number | (() => number | undefined) },
  sharding: Sharding,
  where: string,
): number {
  if (typeof rule.shard === 'number') return sharding.checkShard(rule.shard, `${where} ({ shard })`)
  const shard = rule.shard()
  if (shard === undefined || shard === null) {
    throw new MissingShardKeyError(
      `${where}: its shard function gave no shard (no scope is active?). Run the insert inside the scope that sets it, and await it there: Drizzle builds the query, and asks for the ID, when it is awaited. Or give the ID yourself.`,
    )
  }
  return sharding.checkShard(shard, `${where}: the shard function's result`)
}

/** The ID a row that reaches `.values()` without one gets from the column's `$defaultFn`. */
function nextDefault(spec: ShardedIdSpec): bigint | string {
  const binding = spec.binding
  if (!binding) {
    throw new ConfigurationError(
      'A shardedId() column has no source: call shardedIds(db, { source, schema }) at startup, with its table in schema.',
    )
  }
  const { source } = binding
  const rule = spec.rule
  if (readsRow(rule)) {
    throw new MissingShardKeyError(
      `${binding.where} is placed by its row (${describeShardRule(rule as ShardRule<never>)}), which Drizzle's $defaultFn does not see: give the rows their IDs with \`await ids.assign(${binding.table}, rows)\` before .values(rows), or set the ID yourself.`,
    )
  }
  const column = shardColumnOf(rule)
  if (column) {
    throw new MissingShardKeyError(
      `${binding.where} fills the shard column '${column}' of each row, which Drizzle's $defaultFn does not see: give the rows their IDs with \`await ids.assign(${binding.table}, rows)\` before .values(rows).`,
    )
  }
  if (!isSyncSource(source)) {
    throw new ConfigurationError(
      `${binding.where}: its source answers asynchronously, and Drizzle's $defaultFn must return the ID at once. Give the rows their IDs with \`await ids.assign(${binding.table}, rows)\` before .values(rows), or use a synchronous source (InProcessSource, LeasedSource).`,
    )
  }
  const shard = source.sharding ? shardWithoutRow(rule, source.sharding, binding.where) : 0
  const id = source.nextId(shard)
  return binding.mode === 'string' ? id.toString() : id
}
