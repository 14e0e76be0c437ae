import {
  type ChangeSet,
  ChangeSetType,
  type EntityData,
  type EntityManager,
  type EntityMetadata,
  type EntityName,
  type EntityProperty,
  type EventArgs,
  type EventSubscriber,
  type FlushEventArgs,
  helper,
  Reference,
  ReferenceKind,
  type RequiredEntityData,
  Utils,
} from '@mikro-orm/core'
import {
  allocateIds,
  ConfigurationError,
  type IdSource,
  isSyncSource,
  type Layout,
  logicalShardsOf,
  MissingShardKeyError,
  resolveShard,
  type ShardRule,
  shardForKey,
  toBigInt,
} from '@shardflake/core'
import { type ShardedIdSpec, type SyncAssigner, shardedKeyOf } from './sharded-id'

/** Options of {@link shardedIds}. */
export interface ShardedIdsOptions {
  /**
   * Where IDs come from: `InProcessSource`, `PostgresSource`, `MysqlSource`, ... For a database
   * source, prefetching (`PostgresSource`'s `prefetch` option, or any source wrapped in the core
   * `PrefetchSource`) serves small flushes without a round trip of their own.
   * @example
   * ```ts
   * shardedIds({ source: new PostgresSource({ layout: instagram, databases: pool, prefetch: { size: 100 } }) })
   * shardedIds({ source: new PrefetchSource(mysqlSource, { size: 100, maxAgeMs: 1000 }) })
   * ```
   */
  source: IdSource
  /**
   * Shard keys are reduced modulo this.
   * @default logicalShardsOf(source): the source's `logicalShards`, else the layout's shard count
   */
  logicalShards?: number
}

type Row = Record<string, unknown>

/**
 * Assigns sharded keys (see {@link shardedIds}). One instance per `MikroORM.init()`; forks of the
 * entity manager share it.
 */
export class ShardedIdSubscriber implements EventSubscriber, SyncAssigner {
  readonly source: IdSource
  /** `undefined` for sources of plain IDs without shards (ticket servers): every row is shard 0. */
  readonly layout: Layout | undefined
  readonly logicalShards: number

  constructor(options: ShardedIdsOptions) {
    this.source = options.source
    this.layout = options.source.layout
    this.logicalShards = options.logicalShards ?? logicalShardsOf(options.source)
  }

  /** `onCreate` of a sharded key: an ID now for a sync source whose shard key is known. */
  assignOnCreate(
    entity: object,
    em: EntityManager,
    spec: ShardedIdSpec,
  ): bigint | string | undefined {
    if (!isSyncSource(this.source)) return undefined
    let shard: number
    try {
      shard = this.shardOf(entity, this.metaOf(entity, em, spec))
    } catch (error) {
      // Not known yet (set after em.create()): onFlush assigns it or throws.
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
    return inMode(this.source.nextId(shard), spec.mode)
  }

  /** An entity's metadata; for plain data (`em.upsert(Entity, data)`), the entity the key is of. */
  private metaOf(entity: object, em: EntityManager, spec: ShardedIdSpec): EntityMetadata {
    if (Utils.isEntity(entity, true)) return helper(entity).__meta
    for (const meta of em.getMetadata()) {
      if (shardedKeyOf(meta)?.spec === spec) return meta
    }
    throw new ConfigurationError('A sharded key was created for an entity MikroORM does not know.')
  }

  /**
   * Every new entity of the flush without a key: one `nextIds` per shard. MikroORM computed the
   * change sets while those entities had no key, so their payloads and their children's foreign
   * keys hold placeholders: the new keys are written into the payloads (public `ChangeSet`
   * fields), and a change set this cannot patch (polymorphic relation, table-per-type
   * inheritance) is recomputed with `uow.recomputeSingleChangeSet`. MikroORM's internal
   * `__identifier` is not used.
   */
  async onFlush({ em, uow }: FlushEventArgs): Promise<void> {
    const pending: ChangeSet<Row>[] = []
    for (const changeSet of uow.getChangeSets()) {
      if (changeSet.type !== ChangeSetType.CREATE) continue
      const key = shardedKeyOf(changeSet.meta)
      if (key && changeSet.entity[key.prop.name] == null) pending.push(changeSet)
    }
    if (pending.length === 0) return
    await this.fill(
      pending.map((changeSet) => changeSet.entity),
      pending.map((changeSet) => changeSet.meta),
    )
    // The keys as MikroORM writes them (BigIntType's database value).
    const platform = em.getPlatform()
    const keys = new Map<object, unknown>()
    for (const changeSet of pending) {
      const { prop } = shardedKeyOf(changeSet.meta)!
      const value = changeSet.entity[prop.name]
      keys.set(
        changeSet.entity,
        prop.customType ? prop.customType.convertToDatabaseValue(value, platform) : value,
      )
    }
    for (const changeSet of uow.getChangeSets()) {
      if (changeSet.type !== ChangeSetType.CREATE && changeSet.type !== ChangeSetType.UPDATE) {
        continue
      }
      if (!patchPayload(changeSet as ChangeSet<Row>, keys)) {
        uow.recomputeSingleChangeSet(changeSet.entity)
      }
    }
  }

  /** `em.upsert()`: an async source's ID for data without one (a sync source's came from onCreate). */
  async beforeUpsert({ entity, meta }: EventArgs<object>): Promise<void> {
    const key = shardedKeyOf(meta)
    if (key && (entity as Row)[key.prop.name] == null) await this.fill([entity], [meta])
  }

  /** Gives every row without a key one (see `assignShardedIds`). */
  async assignRows(rows: readonly Row[], meta: EntityMetadata): Promise<void> {
    const key = shardedKeyOf(meta)
    if (!key) {
      throw new ConfigurationError(`${meta.className} has no @ShardedId/shardedId() primary key.`)
    }
    const pending = rows.filter((row) => row[key.prop.name] == null)
    await this.fill(
      pending,
      pending.map(() => meta),
    )
  }

  /** The logical shard of a new entity (or row) by its rule. */
  shardOf(entity: object, meta: EntityMetadata, visiting = new Set<object>()): number {
    const key = shardedKeyOf(meta)
    if (!key) throw new ConfigurationError(`${meta.className} has no sharded primary key.`)
    // A source of plain IDs without shards (ticket servers): shard rules do not apply.
    const layout = this.layout
    if (!layout) return 0
    const rule = key.spec.rule
    const options = {
      layout,
      logicalShards: this.logicalShards,
      entityName: meta.className,
    }
    if ('shard' in rule) return resolveShard(rule, entity, options)
    const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
    const row = entity as Row
    if (typeof ref === 'string') {
      const prop = meta.properties[ref]
      if (prop && isToOne(prop)) {
        return this.shardOfRelated(row[ref], prop.targetMeta, meta, ref, visiting.add(entity))
      }
      return resolveShard(rule as ShardRule<Row>, row, options)
    }
    const value = ref(row)
    if (value !== null && typeof value === 'object') {
      return this.shardOfRelated(value, undefined, meta, 'function', visiting.add(entity))
    }
    return resolveShard(rule as ShardRule<Row>, row, options)
  }

  private async fill(rows: readonly object[], metas: readonly EntityMetadata[]): Promise<void> {
    const shards = rows.map((row, i) => this.shardOf(row, metas[i]!))
    const ids = await allocateIds(this.source, shards)
    rows.forEach((row, i) => {
      const key = shardedKeyOf(metas[i]!)!
      ;(row as Row)[key.prop.name] = inMode(ids[i]!, key.spec.mode)
    })
  }

  /** A relation's shard: a sharded parent's own shard (co-location), else its key as shard key. */
  private shardOfRelated(
    value: unknown,
    targetMeta: EntityMetadata | undefined,
    meta: EntityMetadata,
    via: string,
    visiting: Set<object>,
  ): number {
    const target = Reference.isReference(value) ? value.unwrap() : value
    if (target === null || target === undefined) {
      throw new MissingShardKeyError(
        `The shard key of ${meta.className} (relation '${via}') is missing: set it before flushing, or give the ID yourself.`,
      )
    }
    let related = targetMeta
    let pk: unknown = target
    if (typeof target === 'object') {
      related = metadataOf(target, targetMeta)
      pk = related ? (target as Row)[related.primaryKeys[0]!] : undefined
    }
    const sharded = related ? shardedKeyOf(related) : undefined
    if (pk !== null && pk !== undefined) {
      if (sharded && this.layout)
        return this.layout.shardOf(toBigInt(pk, `${related?.className} ID`))
      return shardForKey(pk as bigint | number | string, this.logicalShards)
    }
    if (sharded && related && typeof target === 'object') {
      if (visiting.has(target)) {
        throw new ConfigurationError(`The shard rules of ${meta.className} form a cycle.`)
      }
      return this.shardOf(target, related, visiting)
    }
    throw new MissingShardKeyError(
      `The shard of ${meta.className} comes from its relation '${via}', whose ${related?.className ?? 'entity'} has no primary key yet.`,
    )
  }
}

/**
 * The MikroORM subscriber that gives every entity with a `@ShardedId()` / `shardedId()` key its
 * 64-bit sharded ID before the INSERT.
 *
 * - **Sync source** (`InProcessSource`): the ID is set by `em.create()` (MikroORM 7 runs `onCreate`
 *   early), so the entity sits in the identity map under its final key before the flush.
 *   Entities made with `new` get theirs at flush.
 * - **Async source** (`PostgresSource`, `MysqlSource`, ...): in `onFlush`, every new entity of
 *   the flush gets its ID, one `nextIds` round trip per shard (none with a prefetching source),
 *   and the keys are written into the change sets so children's foreign keys carry them.
 *   MikroORM 6.6 works too (IDs at flush; see the README for `em.upsert()`).
 * - An entity whose shard key is missing at flush fails with `MissingShardKeyError` before
 *   anything is written. IDs the caller set are kept.
 * - `em.insert`, `em.insertMany` and query-builder inserts bypass every hook: use
 *   `assignShardedIds()` for them (the NOT NULL key fails loudly if you forget).
 *
 * @example
 * ```ts
 * import { InProcessSource, instagram } from '@shardflake/core'
 * import { shardedIds } from '@shardflake/mikro-orm'
 *
 * const orm = await MikroORM.init({
 *   entities: [User, Post],
 *   subscribers: [shardedIds({ source: new InProcessSource({ layout: instagram, shards: 'all' }) })],
 * })
 * ```
 */
export function shardedIds(options: ShardedIdsOptions): ShardedIdSubscriber {
  return new ShardedIdSubscriber(options)
}

/**
 * Gives rows for `em.insert`, `em.insertMany` and `qb.insert()` their sharded IDs (those paths
 * run no hooks). Rows use property names; a relation may hold an entity, a reference or the
 * parent's primary key. Rows that already have an ID keep it. One `nextIds` per shard.
 *
 * @example
 * ```ts
 * const rows = await assignShardedIds(em, Post, [{ author: authorId, title: 'a' }, { author: authorId, title: 'b' }])
 * await em.insertMany(Post, rows)
 * ```
 */
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  rows: R[],
): Promise<(R & RequiredEntityData<T>)[]>
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  row: R,
): Promise<R & RequiredEntityData<T>>
export async function assignShardedIds<T extends object, R extends EntityData<T>>(
  em: EntityManager,
  entityName: EntityName<T>,
  rows: R | R[],
): Promise<R | R[]> {
  const subscriber = subscriberOf(em)
  const list: Row[] = (Array.isArray(rows) ? rows : [rows]).map((row) => row as Row)
  await subscriber.assignRows(list, em.getMetadata().get(entityName))
  return rows
}

function subscriberOf(em: EntityManager): ShardedIdSubscriber {
  for (const subscriber of em.getEventManager().getSubscribers()) {
    if (subscriber instanceof ShardedIdSubscriber) return subscriber
  }
  throw new ConfigurationError(
    'No shardedIds() subscriber is registered: add `subscribers: [shardedIds({ source })]` to MikroORM.init().',
  )
}

/**
 * Writes new keys into a change set: its own key if it is new, and every to-one relation that
 * points at a new entity. False when the change set has a shape this does not patch.
 */
function patchPayload(changeSet: ChangeSet<Row>, keys: ReadonlyMap<object, unknown>): boolean {
  const { meta, entity, payload } = changeSet
  const own = keys.get(entity)
  if (own !== undefined) {
    // (inheritanceType, polymorphic and targetKey are MikroORM 7 fields: read loosely for 6)
    if (loose(meta).inheritanceType === 'tpt' || meta.primaryKeys.length !== 1) return false
    payload[meta.primaryKeys[0]!] = own
  }
  for (const prop of meta.relations) {
    if (!isToOne(prop) || !(prop.name in payload)) continue
    const value = entity[prop.name]
    if (value === null || value === undefined) continue
    const target = Reference.unwrapReference(value as object)
    const key = keys.get(target)
    if (key === undefined) continue
    const { polymorphic, targetKey } = loose(prop)
    if (polymorphic || targetKey || prop.fieldNames.length !== 1) return false
    payload[prop.name] = key
  }
  return true
}

function loose(value: object): {
  inheritanceType?: unknown
  polymorphic?: unknown
  targetKey?: unknown
} {
  return value
}

function metadataOf(entity: object, fallback: EntityMetadata | undefined) {
  return Utils.isEntity(entity, true) ? helper(entity).__meta : fallback
}

function isToOne(prop: EntityProperty): boolean {
  return (
    prop.kind === ReferenceKind.MANY_TO_ONE ||
    (prop.kind === ReferenceKind.ONE_TO_ONE && prop.owner)
  )
}

function inMode(id: bigint, mode: 'bigint' | 'string'): bigint | string {
  return mode === 'string' ? id.toString() : id
}
