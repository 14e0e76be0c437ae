import { checkShardRule, InvalidArgumentError, type ShardRule } from '@shardflake/core'
import { type EntitySchemaColumnOptions, PrimaryColumn } from 'typeorm'

/**
 * Where a row's shard comes from: core's `ShardRule`, with the same meaning in every adapter.
 * - `shardBy`: a property (or function) holding a plain shard key, such as a tenant or user
 *   number or an email (integers and digit strings: `key % logicalShards`; other strings:
 *   hashed). A property that holds another sharded entity's ID (a relation, or its foreign-key
 *   column) is refused when the DataSource initializes: use `sameShardAs`.
 * - `sameShardAs`: the parent, so the row lands on the parent's shard (comments with their
 *   post). Name the **relation** (`'post'`) or the **foreign-key column** holding the parent's ID
 *   (`'postId'`); the shard is read from the parent's ID. A parent saved in the same `save()`
 *   call works before it has its ID, whether the child points at it or the parent lists the
 *   child (also a loaded parent whose one-to-many relation the new child was pushed onto).
 * - `shard`: a fixed logical shard.
 *
 * Any of them may add `shardColumn: '<property>'`: an integer column that receives the logical
 * shard of the row's ID on every insert, for distributed engines that route by a column value
 * (Citus, Vitess, PgDog). A value the caller sets must be the ID's shard (`MisplacedIdError`), and
 * a `save()` that changes it is refused (`ShardKeyChangedError`).
 */
export type ShardedIdRule<T = Record<string, unknown>> = ShardRule<T>

/** Column settings `@ShardedId` passes on to TypeORM. The column is always `bigint`, primary, not generated. */
export interface ShardedIdColumnOptions {
  /** Database column name. @default the property name */
  readonly name?: string
  /** Name of the primary key constraint. */
  readonly primaryKeyConstraintName?: string
  /** Column comment. */
  readonly comment?: string
}

/** The rule of `@ShardedId` plus column settings. */
export type ShardedIdOptions<T = Record<string, unknown>> = ShardedIdRule<T> &
  ShardedIdColumnOptions

/** Every option of `@ShardedId` and `shardedIdColumn` besides the rule's. */
const COLUMN_OPTIONS = ['name', 'primaryKeyConstraintName', 'comment']

/** What the subscriber needs to know about a sharded entity. */
export interface ShardedIdEntry {
  readonly propertyName: string
  readonly rule: ShardedIdRule<Record<string, unknown>>
}

// biome-ignore lint/complexity/noBannedTypes: TypeORM identifies entities by constructor.
type EntityTarget = Function | string

const registry = new Map<EntityTarget, ShardedIdEntry>()
const schemaColumns = new WeakMap<object, ShardedIdRule<Record<string, unknown>>>()

/**
 * Declares the primary key of an entity as a shardflake ID: a `bigint` primary column that the
 * database does not generate, filled before the INSERT by the subscriber of
 * `shardedIds()`, from the given shard rule. The property holds a decimal `string`
 * (TypeORM's BIGINT representation), or a `bigint` with `idType: 'bigint'`.
 *
 * Needs `experimentalDecorators` (TypeORM's decorators are legacy decorators).
 *
 * @throws InvalidShardRuleError when the rule is not exactly one of shardBy, sameShardAs, shard.
 * @throws InvalidArgumentError for an unknown option (a misspelt `stringkeys`), naming the closest.
 * @example
 * ```ts
 * @Entity()
 * class Post {
 *   @ShardedId({ shardBy: 'tenantId' })  // a plain key: tenantId % logicalShards
 *   id!: string
 *   @Column({ type: 'bigint' }) tenantId!: string
 * }
 *
 * @Entity()
 * class Comment {
 *   @ShardedId({ sameShardAs: 'post', shardColumn: 'lshard' })  // lands on its post's shard
 *   id!: string
 *   @ManyToOne(() => Post) post!: Post
 *   @Column({ type: 'int' }) lshard!: number  // filled with the ID's shard, for Citus and friends
 * }
 * ```
 */
export function ShardedId<T = Record<string, unknown>>(
  options: ShardedIdOptions<T>,
): PropertyDecorator {
  return (prototype, property) => {
    if (typeof property !== 'string')
      throw new InvalidArgumentError('@ShardedId needs a string property name.')
    checkShardRule(options, prototype.constructor.name, COLUMN_OPTIONS)
    PrimaryColumn({
      type: 'bigint',
      name: options.name,
      primaryKeyConstraintName: options.primaryKeyConstraintName,
      comment: options.comment,
    })(prototype, property)
    registerShardedId(prototype.constructor, property, options)
  }
}

/**
 * The `EntitySchema` counterpart of {@link ShardedId}: column options for a sharded primary key.
 * Pass the schema itself (not a glob path) in `DataSource` `entities`, so the subscriber finds
 * the rule; otherwise call {@link registerShardedId}.
 *
 * @example
 * ```ts
 * const PostSchema = new EntitySchema<Post>({
 *   name: 'Post',
 *   tableName: 'posts',
 *   columns: {
 *     id: shardedIdColumn<Post>({ shardBy: 'tenantId' }),
 *     tenantId: { type: 'bigint', name: 'tenant_id' },
 *   },
 * })
 * ```
 */
export function shardedIdColumn<T = Record<string, unknown>>(
  options: ShardedIdOptions<T>,
): EntitySchemaColumnOptions {
  checkShardRule(options, 'an EntitySchema column', COLUMN_OPTIONS)
  const column: EntitySchemaColumnOptions = {
    type: 'bigint',
    primary: true,
    name: options.name,
    primaryKeyConstraintName: options.primaryKeyConstraintName,
    comment: options.comment,
  }
  schemaColumns.set(column, toEntryRule(options))
  return column
}

/**
 * Registers a sharded key by hand: for entity schemas loaded from paths, or entities declared
 * without `@ShardedId`. The column must be a `bigint` primary key the database does not generate.
 *
 * @example
 * ```ts
 * registerShardedId('Post', 'id', { shardBy: 'tenantId' })
 * ```
 */
export function registerShardedId<T = Record<string, unknown>>(
  target: EntityTarget,
  propertyName: string,
  rule: ShardedIdRule<T>,
): void {
  checkShardRule(rule, typeof target === 'string' ? target : target.name, [])
  registry.set(target, { propertyName, rule: toEntryRule(rule) })
}

/** The sharded key of an entity target, looking through its base classes. */
export function findShardedId(target: EntityTarget | undefined): ShardedIdEntry | undefined {
  let current: unknown = target
  while (current) {
    const entry = registry.get(current as EntityTarget)
    if (entry) return entry
    if (typeof current !== 'function') return undefined
    current = Object.getPrototypeOf(current)
  }
  return undefined
}

/** Registers the `shardedIdColumn` columns of the `EntitySchema` objects among `entities`. */
export function registerSchemas(entities: unknown): void {
  const list = Array.isArray(entities)
    ? entities
    : entities && typeof entities === 'object'
      ? Object.values(entities)
      : []
  for (const entity of list) {
    const options = (
      entity as { options?: { name?: unknown; target?: unknown; columns?: unknown } }
    )?.options
    if (!options || typeof options.columns !== 'object' || options.columns === null) continue
    for (const [property, column] of Object.entries(options.columns)) {
      const rule = column && typeof column === 'object' ? schemaColumns.get(column) : undefined
      if (!rule) continue
      const target = typeof options.target === 'function' ? options.target : options.name
      if (typeof target === 'function' || typeof target === 'string') {
        registry.set(target, { propertyName: property, rule })
      }
    }
  }
}

function toEntryRule<T>(rule: ShardedIdRule<T>): ShardedIdRule<Record<string, unknown>> {
  const shardColumn = rule.shardColumn as string | undefined
  const column = shardColumn === undefined ? {} : { shardColumn }
  if ('shard' in rule) return { shard: rule.shard, ...column }
  if ('sameShardAs' in rule) {
    return { sameShardAs: rule.sameShardAs, ...column } as ShardedIdRule<Record<string, unknown>>
  }
  return { shardBy: rule.shardBy, stringKeys: rule.stringKeys, ...column } as ShardedIdRule<
    Record<string, unknown>
  >
}
