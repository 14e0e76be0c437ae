import type { EntityMetadata } from '@mikro-orm/core'
import {
  type ChangeSet,
  ChangeSetType,
  helper,
  type Platform,
  Reference,
  type UnitOfWork,
} from '@mikro-orm/core'
import {
  checkKeyChange,
  checkSuppliedId,
  describeShardRule,
  MissingShardKeyError,
  type Sharding,
  ShardKeyChangedError,
  suppliedIdsTrusted,
} from '@shardflake/core'
import type { Placement } from './placement'
import { isToOne, relationOf } from './rules'
import { shardedKeyOf } from './sharded-id'

type Row = Record<string, unknown>

/** What a flush needs: entities without a key, and entities whose early key is on the wrong shard. */
export interface FlushPlan {
  readonly pending: ChangeSet<Row>[]
  readonly moved: ChangeSet<Row>[]
  /**
   * The shards of the new entities whose early key was found on its rule's shard, each once
   * (`true` by shard): a home check needs no more of them.
   */
  readonly keptShards: boolean[]
  /** The change sets with a key whose shard the plan did not read: updates, and keys the caller set. */
  readonly unread: ChangeSet<Row>[]
}

/**
 * Sorts the flush's new entities with a sharded key: those without a key (`pending`), and those
 * whose key was given at `em.create()` (`issued`) but whose rule now gives another shard
 * (`moved`). A moved entity another entity of the flush references cannot change its ID. Keys
 * the caller gave, and updates of a field a rule reads, are checked against the rule.
 * @throws ShardKeyChangedError for a moved entity that is referenced, or an update that moves a
 *   stored row to another shard than its ID's
 * @throws MisplacedIdError for a caller's ID on another shard than its rule gives
 * @throws UnsafeNumberError, InvalidIdError for a caller's ID that is not an exact 64-bit integer
 * @throws MissingShardKeyError when a rule's key or parent is missing
 */
export function planFlush(
  uow: UnitOfWork,
  placement: Placement,
  issued: { get(entity: object): unknown },
): FlushPlan {
  const pending: ChangeSet<Row>[] = []
  const moved: ChangeSet<Row>[] = []
  const supplied: ChangeSet<Row>[] = []
  const keptShards: boolean[] = []
  const unread: ChangeSet<Row>[] = []
  const sharding = placement.sharding
  const changeSets = uow.getChangeSets() as ChangeSet<Row>[]
  for (const changeSet of changeSets) {
    const key = shardedKeyOf(changeSet.meta)
    if (!key) continue
    const id = changeSet.entity[key.prop.name]
    if (changeSet.type === ChangeSetType.UPDATE) {
      if (readsRule(changeSet)) checkUpdate(changeSet.entity, changeSet.meta, placement, id)
      unread.push(changeSet)
      continue
    }
    if (changeSet.type !== ChangeSetType.CREATE) continue
    if (id === null || id === undefined) pending.push(changeSet)
    else if (issued.get(changeSet.entity) !== id) {
      supplied.push(changeSet)
      unread.push(changeSet)
    } else if (sharding) {
      const shard = placement.shardOf(changeSet.entity, changeSet.meta, key)
      if (shard !== sharding.shardOfId(id as bigint | string)) {
        refuseIfReferenced(changeSet, changeSets, sharding, shard)
        moved.push(changeSet)
      } else keptShards[shard] = true
    }
  }
  for (const { entity, meta } of supplied) {
    checkSuppliedId(
      sharding,
      entity[meta.primaryKeys[0]!],
      sharding && !suppliedIdsTrusted() ? ruleShard(placement, entity, meta) : undefined,
      describeRow(meta),
    )
  }
  return { pending, moved, keptShards, unread }
}

/**
 * Refuses an update of a stored entity whose rule, applied to it as it is now, gives another
 * shard than its ID's (an ID never changes shard).
 * @throws ShardKeyChangedError
 */
export function checkUpdate(
  entity: object,
  meta: EntityMetadata,
  placement: Placement,
  id: unknown,
  how = 'flush',
): void {
  if (!placement.sharding || suppliedIdsTrusted() || id === null || id === undefined) return
  const shard = ruleShard(placement, entity, meta)
  checkKeyChange(placement.sharding, id, shard, `${describeRow(meta)}, by ${how}`)
}

/** The shard an entity's rule gives as it is now, or undefined when its key or parent is not set. */
export function ruleShard(
  placement: Placement,
  entity: object,
  meta: EntityMetadata,
): number | undefined {
  try {
    return placement.shardOf(entity, meta)
  } catch (error) {
    if (error instanceof MissingShardKeyError) return undefined
    throw error
  }
}

/** Whether an update's payload writes a property the rule reads (a function or getter: always). */
function readsRule({ meta, payload }: ChangeSet<Row>): boolean {
  const rule = shardedKeyOf(meta)!.spec.rule
  if ('shard' in rule) return false
  const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof field !== 'string' || !meta.properties[field]) return true
  return field in payload || (relationOf(meta, field)?.name ?? field) in payload
}

/** An entity and its rule, for messages: `Post (sameShardAs 'author')`. */
function describeRow(meta: EntityMetadata): string {
  return `${meta.className} (${describeShardRule(shardedKeyOf(meta)!.spec.rule as never)})`
}

function refuseIfReferenced(
  moved: ChangeSet<Row>,
  changeSets: readonly ChangeSet<Row>[],
  sharding: Sharding,
  shard: number,
): void {
  for (const changeSet of changeSets) {
    if (changeSet.entity === moved.entity) continue
    for (const prop of changeSet.meta.relations) {
      const value = changeSet.entity[prop.name]
      if (!isToOne(prop) || value === null || value === undefined) continue
      if (Reference.unwrapReference(value as object) !== moved.entity) continue
      const id = String(moved.entity[moved.meta.primaryKeys[0]!])
      throw new ShardKeyChangedError(
        `${moved.meta.className} ${id} got its ID at em.create() on shard ${sharding.shardOfId(id)}, but its shard rule now gives shard ${shard}, and ${changeSet.meta.className}.${prop.name} already references it, so its ID cannot change. Nothing was written. Set the shard key (or parent) before em.create(), or create it with new + em.persist() to get its ID at flush.`,
      )
    }
  }
}

/**
 * Takes moved entities out of the identity map under their old key (before re-keying), or puts
 * them back under their new one (after).
 */
export function rekey(uow: UnitOfWork, moved: readonly ChangeSet<Row>[], phase: 'out' | 'in') {
  const map = uow.getIdentityMap()
  for (const changeSet of moved) {
    if (phase === 'out') {
      map.delete(changeSet.entity)
      continue
    }
    const wrapped = helper(changeSet.entity)
    wrapped.setPrimaryKey(changeSet.entity[changeSet.meta.primaryKeys[0]!] as never)
    map.store(changeSet.entity)
    // Cached (privately) by the change set when it was computed under the old key.
    Reflect.set(changeSet, 'primaryKey', undefined)
    Reflect.set(changeSet, 'serializedPrimaryKey', undefined)
  }
}

/**
 * Writes new keys into a change set: its own key if it is new, and every to-one relation that
 * points at a new entity. False when the change set has a shape this does not patch.
 */
export function patchPayload(
  changeSet: ChangeSet<Row>,
  keys: ReadonlyMap<object, unknown>,
): boolean {
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
    const key = keys.get(Reference.unwrapReference(value as object))
    if (key === undefined) continue
    const { polymorphic, targetKey } = loose(prop)
    if (polymorphic || targetKey || prop.fieldNames.length !== 1) return false
    payload[prop.name] = key
  }
  return true
}

/** The keys of `changeSets` as MikroORM writes them (BigIntType's database value). */
export function databaseKeys(
  changeSets: readonly ChangeSet<Row>[],
  platform: Platform,
): Map<object, unknown> {
  const keys = new Map<object, unknown>()
  for (const changeSet of changeSets) {
    const { prop } = shardedKeyOf(changeSet.meta)!
    const value = changeSet.entity[prop.name]
    keys.set(
      changeSet.entity,
      prop.customType ? prop.customType.convertToDatabaseValue(value, platform) : value,
    )
  }
  return keys
}

function loose(value: object): {
  inheritanceType?: unknown
  polymorphic?: unknown
  targetKey?: unknown
} {
  return value
}
