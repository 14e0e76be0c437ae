import {
  BigIntType,
  type EntityManager,
  type EntityMetadata,
  type EntityProperty,
} from '@mikro-orm/core'
import {
  ConfigurationError,
  type IdInput,
  type ShardKey,
  type StringKeyMode,
} from '@shardflake/core'

/**
 * Where an entity's shard comes from. Exactly one of:
 *
 * - `shardBy`: a property or a function giving a shard key. A scalar key is reduced like
 *   everywhere in shardflake (integers `mod logicalShards`, other strings hashed). A **ManyToOne
 *   or owning OneToOne relation** means *the related entity's shard*: the row is co-located with
 *   its parent (a post with its author). A relation to an entity without a sharded key uses that
 *   entity's primary key as the shard key.
 * - `sameShardAs`: a property or function giving a parent: a relation (same as above) or a
 *   parent's sharded ID (scalar foreign key), read with `layout.shardOf`.
 * - `shard`: a fixed logical shard.
 *
 * @example
 * ```ts
 * { shardBy: 'email' }          // hash of the email
 * { shardBy: 'author' }         // the author's shard (ManyToOne)
 * { sameShardAs: 'post' }       // the post's shard
 * { shardBy: (order) => order.customerId }
 * ```
 */
export type ShardedIdRule<T = Record<string, unknown>> =
  | {
      readonly shardBy: PropertyName<T> | ((entity: T) => ShardKey | object | null | undefined)
      /** How string keys are read. @default 'auto' */
      readonly stringKeys?: StringKeyMode
    }
  | { readonly sameShardAs: PropertyName<T> | ((entity: T) => IdInput | object | null | undefined) }
  | { readonly shard: number }

/** A property of `T`, or any name when `T` is not given. */
type PropertyName<T> = [keyof T & string] extends [never] ? string : keyof T & string

/** Options every form of the sharded key takes besides its {@link ShardedIdRule}. */
export interface ShardedIdTypeOptions {
  /**
   * The JavaScript type of the key. `'string'` gives decimal strings (what JSON clients need);
   * never a `number`, which loses precision above 2^53.
   * @default 'bigint'
   */
  readonly mode?: 'bigint' | 'string'
  /** Column name, when it differs from the naming strategy's. */
  readonly fieldName?: string
}

/** Options of `@ShardedId()` and `shardedId()`: a rule plus the key's type. */
export type ShardedIdOptions<T = Record<string, unknown>> = ShardedIdRule<T> & ShardedIdTypeOptions

/**
 * The MikroORM primary key options of a sharded key: BIGINT, not autoincrement, filled by
 * `onCreate` (and by the subscriber at flush).
 */
export function primaryKeyOptions<T>(options: ShardedIdOptions<T>) {
  const { spec, onCreate } = shardedIdParts(options)
  return {
    type: new BigIntType(spec.mode),
    autoincrement: false,
    onCreate,
    ...(options.fieldName === undefined ? {} : { fieldName: options.fieldName }),
  }
}

/** What the subscriber reads back from a sharded primary key property. */
export interface ShardedIdSpec {
  readonly rule: ShardedIdRule<Record<string, unknown>>
  readonly mode: 'bigint' | 'string'
}

/**
 * The `onCreate` callback of a sharded key. MikroORM calls it at `em.create()` (v7 default
 * `processOnCreateHooksEarly`) and again at flush for entities still without a key.
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
 * Splits `@ShardedId`/`shardedId` options into the rule (kept by shardflake) and the column
 * options (given to MikroORM), and makes the `onCreate` callback that carries the rule.
 */
export function shardedIdParts<T>(options: ShardedIdOptions<T>): {
  spec: ShardedIdSpec
  onCreate: ShardedIdOnCreate
} {
  const mode = options.mode ?? 'bigint'
  if (mode !== 'bigint' && mode !== 'string') {
    throw new ConfigurationError(
      `@ShardedId mode must be 'bigint' or 'string', got ${JSON.stringify(mode)}: numbers lose precision above 2^53.`,
    )
  }
  const rule = pickRule(options)
  const spec: ShardedIdSpec = { rule, mode }
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
        'An entity with a sharded key was created, but no shardedIds() subscriber is registered. Add `subscribers: [shardedIds({ source })]` to MikroORM.init().',
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
  const given = ['shardBy', 'sameShardAs', 'shard'].filter((key) => key in options)
  if (given.length !== 1) {
    throw new ConfigurationError(
      `@ShardedId needs exactly one of shardBy, sameShardAs or shard; got ${given.length ? given.join(', ') : 'none'}.`,
    )
  }
  if ('shard' in options) return { shard: options.shard }
  if ('sameShardAs' in options) {
    return { sameShardAs: options.sameShardAs } as ShardedIdRule<Record<string, unknown>>
  }
  return { shardBy: options.shardBy, stringKeys: options.stringKeys } as ShardedIdRule<
    Record<string, unknown>
  >
}
