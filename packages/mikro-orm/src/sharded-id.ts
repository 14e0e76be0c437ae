import {
  BigIntType,
  type EntityManager,
  type EntityMetadata,
  type EntityProperty,
} from '@mikro-orm/core'
import {
  ConfigurationError,
  checkShardRule,
  type IdInput,
  type ShardColumnOption,
  type ShardKey,
  type StringKeyMode,
} from '@shardflake/core'

/**
 * Where an entity's shard comes from, with the same meaning as in every shardflake adapter.
 * Exactly one of:
 *
 * - `shardBy`: a property (or function) holding a **plain key**: a tenant id, an email. Integers
 *   go to `key mod logicalShards`, other strings are hashed. A to-one relation to an entity whose
 *   key is not sharded (an autoincrement tenant) uses that entity's primary key as the key.
 *   `shardBy` on a relation or foreign key holding a *sharded* entity's ID is refused when
 *   MikroORM discovers the entity (`InvalidShardRuleError`): use `sameShardAs`.
 * - `sameShardAs`: a to-one relation, or its foreign-key property, holding a sharded parent: the
 *   row goes on the parent's shard, read from the parent's ID (a comment with its post). A
 *   function may return the parent entity or its ID.
 * - `shard`: a fixed logical shard.
 *
 * Any of them may add `shardColumn: '<property>'`: an integer property that receives the logical
 * shard of the row's ID at flush, for engines that route by a column value (Citus, Vitess, PgDog).
 *
 * @example
 * ```ts
 * { shardBy: 'email' }                          // hash of the email
 * { shardBy: (order) => order.customerId }      // a plain key from a function
 * { sameShardAs: 'author' }                     // the author's shard (relation or its FK property)
 * { shard: 0 }                                  // always shard 0
 * ```
 */
export type ShardedIdRule<T = Record<string, unknown>> = (
  | {
      readonly shardBy: PropertyName<T> | ((entity: T) => ShardKey | null | undefined)
      /** How string keys are read. @default 'auto' */
      readonly stringKeys?: StringKeyMode
    }
  | {
      readonly sameShardAs: PropertyName<T> | ((entity: T) => IdInput | object | null | undefined)
    }
  | { readonly shard: number }
) &
  ShardColumnOption

/** A property of `T`, or any name when `T` is not given. */
type PropertyName<T> = [keyof T & string] extends [never] ? string : keyof T & string

/** The JavaScript type of sharded keys: never `number`, which loses precision above 2^53. */
export type IdType = 'bigint' | 'string'

/** Options every form of the sharded key takes besides its {@link ShardedIdRule}. */
export interface ShardedIdTypeOptions {
  /**
   * The JavaScript type of this key. `'string'` gives decimal strings (what JSON clients need).
   * @default the `idType` given to `shardedIds()`, itself `'bigint'` by default
   */
  readonly idType?: IdType
  /** Column name, when it differs from the naming strategy's. */
  readonly fieldName?: string
}

/** Options of `@ShardedId()` and `shardedId()`: a rule plus the key's type. */
export type ShardedIdOptions<T = Record<string, unknown>> = ShardedIdRule<T> & ShardedIdTypeOptions

/** What the subscriber reads back from a sharded primary key property. */
export interface ShardedIdSpec {
  readonly rule: ShardedIdRule<Record<string, unknown>>
  /** The type the key declared; `undefined` takes `shardedIds({ idType })`. */
  readonly idType: IdType | undefined
  /** The key's column type, shared by every ORM using the entity. */
  readonly type: BigIntType<IdType>
}

/**
 * The `onCreate` callback of a sharded key. MikroORM calls it at `em.create()` (v7 default
 * `processOnCreateHooksEarly`) and at flush for entities still without a key.
 */
export type ShardedIdOnCreate = (entity: object, em: EntityManager) => bigint | string | undefined

/** Fills a key synchronously when it can (the subscriber implements this). */
export interface SyncAssigner {
  assignOnCreate(
    entity: object,
    em: EntityManager,
    spec: ShardedIdSpec,
  ): bigint | string | undefined
}

const specs = new WeakMap<object, ShardedIdSpec>()
const assigners = new WeakMap<object, SyncAssigner>()

/**
 * The MikroORM primary key options of a sharded key: BIGINT, not autoincrement, filled by
 * `onCreate` (and by the subscriber at flush).
 */
export function primaryKeyOptions<T>(options: ShardedIdOptions<T>) {
  const { spec, onCreate } = shardedIdParts(options)
  return {
    type: spec.type,
    autoincrement: false,
    onCreate,
    ...(options.fieldName === undefined ? {} : { fieldName: options.fieldName }),
  }
}

/**
 * Splits `@ShardedId`/`shardedId` options into the rule (kept by shardflake) and the column
 * options (given to MikroORM), and makes the `onCreate` callback that carries the rule.
 * @throws InvalidShardRuleError for a malformed rule
 * @throws InvalidArgumentError for an unknown option (a misspelt `stringkeys`), naming the closest
 * @throws ConfigurationError for an `idType` other than `'bigint'` or `'string'`
 */
export function shardedIdParts<T>(options: ShardedIdOptions<T>): {
  spec: ShardedIdSpec
  onCreate: ShardedIdOnCreate
} {
  const rule = pickRule(options)
  const idType = options.idType
  if (idType !== undefined && idType !== 'bigint' && idType !== 'string') {
    throw new ConfigurationError(
      `@ShardedId idType must be 'bigint' or 'string', got ${JSON.stringify(idType)}: numbers lose precision above 2^53.`,
    )
  }
  const spec: ShardedIdSpec = { rule, idType, type: new BigIntType<IdType>(idType ?? 'bigint') }
  const onCreate: ShardedIdOnCreate = (entity, em) =>
    assignerOf(em).assignOnCreate(entity, em, spec)
  specs.set(onCreate, spec)
  return { spec, onCreate }
}

/** Marks another callback (a typed wrapper of `onCreate`) as a sharded key's. */
export function adoptOnCreate<F extends object>(callback: F, spec: ShardedIdSpec): F {
  specs.set(callback, spec)
  return callback
}

/** The sharded key of an entity type: its primary key property and rule, if it has one. */
export function shardedKeyOf(
  meta: EntityMetadata,
): { prop: EntityProperty; spec: ShardedIdSpec } | undefined {
  if (meta.primaryKeys.length !== 1) return undefined
  const prop = meta.properties[meta.primaryKeys[0]!]
  const spec = prop?.onCreate ? specs.get(prop.onCreate) : undefined
  return prop && spec ? { prop, spec } : undefined
}

/** The JavaScript type a key hands out (its column type's mode, see `shardedIds({ idType })`). */
export function idTypeOf(prop: EntityProperty): IdType {
  return (prop.customType as BigIntType<IdType> | undefined)?.mode === 'string'
    ? 'string'
    : 'bigint'
}

/** Registers the object that fills keys for an event manager (called by the subscriber). */
export function registerAssigner(eventManager: object, assigner: SyncAssigner): void {
  assigners.set(eventManager, assigner)
}

function assignerOf(em: EntityManager): SyncAssigner {
  const events = em.getEventManager()
  let assigner = assigners.get(events)
  if (!assigner) {
    for (const subscriber of events.getSubscribers()) {
      if (isAssigner(subscriber)) assigner = subscriber
    }
    if (!assigner) {
      throw new ConfigurationError(
        'An entity with a sharded key was created, but MikroORM has no shardedIds(): add `extensions: [shardedIds({ source })]` to MikroORM.init().',
      )
    }
    assigners.set(events, assigner)
  }
  return assigner
}

function isAssigner(value: object): value is SyncAssigner {
  return typeof (value as Partial<SyncAssigner>).assignOnCreate === 'function'
}

function pickRule<T>(options: ShardedIdOptions<T>): ShardedIdRule<Record<string, unknown>> {
  checkShardRule(options, '@ShardedId', ['idType', 'fieldName'])
  const shardColumn = options.shardColumn as string | undefined
  const column = shardColumn === undefined ? {} : { shardColumn }
  if ('shard' in options && options.shard !== undefined) return { shard: options.shard, ...column }
  if ('sameShardAs' in options && options.sameShardAs !== undefined) {
    return { sameShardAs: options.sameShardAs, ...column } as ShardedIdRule<Record<string, unknown>>
  }
  const { shardBy, stringKeys } = options as { shardBy: never; stringKeys?: StringKeyMode }
  return stringKeys === undefined ? { shardBy, ...column } : { shardBy, stringKeys, ...column }
}
