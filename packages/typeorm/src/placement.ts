/**
 * Where each new row of one call goes: the shard rule of its entity, with `sameShardAs` parents
 * found wherever the call has them (the child's relation, a parent inserted in the same call, a
 * loaded parent of the saved graph whose one-to-many relation lists the child).
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import { MissingShardKeyError, type Sharding, toBigInt } from '@shardflake/core'
import type { EntityMetadata, ObjectLiteral, RelationMetadata } from 'typeorm'
import { findShardedId, type ShardedIdEntry } from './sharded-id'

/** One row waiting for its ID. */
export interface Pending {
  readonly entity: ObjectLiteral
  readonly metadata: EntityMetadata
  readonly sharded: ShardedIdEntry
  /** The entities handed to the `save()` this row belongs to, when it came from one. */
  readonly roots: SaveRoots | undefined
  shard?: number
  resolving?: boolean
}

/** What one `EntityManager.save()` call was handed, and how to find an entity's metadata. */
export interface SaveRoots {
  /** An entity or an array of entities. */
  readonly entity: unknown
  /** The metadata of the call's target, when it named one (`save(Post, { ... })`). */
  readonly target: EntityMetadata | undefined
  /** The metadata of an entity instance, by its class. */
  readonly metadataOf: (entity: object) => EntityMetadata | undefined
}

/**
 * The `save()` calls in progress, per async context: `shardedIds()` runs every `save()` of its
 * DataSource inside one, so a hook can find loaded parents the call does not insert.
 */
export const saveRoots = new AsyncLocalStorage<SaveRoots>()

/** Places the rows of one call, each once; parents before their children. */
export class Placement {
  private readonly byEntity: Map<ObjectLiteral, Pending>
  private graphParents: Map<object, Listing[]> | undefined

  constructor(
    private readonly sharding: Sharding | undefined,
    private readonly batch: readonly Pending[],
  ) {
    this.byEntity = new Map(batch.map((item) => [item.entity, item]))
  }

  shardOf(item: Pending): number {
    if (item.shard !== undefined) return item.shard
    const sharding = this.sharding
    if (!sharding) return 0 // IDs without a shard field (ticket servers)
    if (item.resolving) {
      throw new MissingShardKeyError(
        `The sameShardAs rule of ${item.metadata.name} points back at itself through its parents.`,
      )
    }
    item.resolving = true
    const { rule } = item.sharded
    const shard =
      'sameShardAs' in rule
        ? this.parentShard(item, rule.sameShardAs as string | ((entity: unknown) => unknown))
        : sharding.resolveShard(rule, item.entity, item.metadata.name)
    item.shard = shard
    item.resolving = false
    return shard
  }

  private parentShard(item: Pending, ref: string | ((entity: unknown) => unknown)): number {
    const sharding = this.sharding!
    const what = `sameShardAs ${typeof ref === 'function' ? '(function)' : `'${ref}'`}`
    let parent: unknown = typeof ref === 'function' ? ref(item.entity) : item.entity[ref]
    let relation: RelationMetadata | undefined
    if (typeof ref === 'string') {
      relation = relationOf(item.metadata, ref)
      if ((parent === undefined || parent === null) && relation) {
        parent =
          relation.getEntityValue(item.entity) ??
          foreignKeyOf(item, relation) ??
          this.listingParent(item, relation)
      }
    }
    if (parent === undefined || parent === null) {
      throw new MissingShardKeyError(
        `The parent of ${item.metadata.name} (${what}) is missing: the row's shard comes from it. Set the relation or its foreign key before saving.`,
      )
    }
    if (typeof parent !== 'object') {
      return sharding.shardOfId(toBigInt(parent, `Parent ID of ${item.metadata.name}`))
    }
    const inBatch = this.byEntity.get(parent)
    if (inBatch) return this.shardOf(inBatch)
    const id = parentId(parent, relation)
    if (id === undefined || id === null) {
      throw new MissingShardKeyError(
        `The parent of ${item.metadata.name} (${what}) has no ID yet and is not saved in the same call: save it first, or let the save cascade to it.`,
      )
    }
    return sharding.shardOfId(toBigInt(id, `Parent ID of ${item.metadata.name}`))
  }

  /** The parent that lists `item` in the inverse (one-to-many) side of `relation`. */
  private listingParent(item: Pending, relation: RelationMetadata): object | undefined {
    const inverse = relation.inverseRelation
    if (!inverse) return undefined
    for (const candidate of this.batch) {
      if (candidate === item || !isOf(candidate.metadata, relation.inverseEntityMetadata)) continue
      if (lists(inverse.getEntityValue(candidate.entity), item.entity)) return candidate.entity
    }
    this.graphParents ??= parentsInGraph(this.batch)
    return this.graphParents
      .get(item.entity)
      ?.find(
        ({ via }) => via === inverse || via.inverseRelation?.propertyPath === relation.propertyPath,
      )?.parent
  }
}

/** The relation a `sameShardAs` name means: the relation itself, or the one using that column. */
export function relationOf(metadata: EntityMetadata, name: string): RelationMetadata | undefined {
  const direct = metadata.findRelationWithPropertyPath(name)
  if (direct) return direct
  const column = metadata.findColumnWithPropertyName(name)
  if (!column) return undefined
  return metadata.relations.find((relation) =>
    relation.joinColumns.some((joinColumn) => joinColumn.databaseName === column.databaseName),
  )
}

/** The value of a column of its own holding `relation`'s foreign key (`authorId` beside `author`). */
function foreignKeyOf(item: Pending, relation: RelationMetadata): unknown {
  for (const joinColumn of relation.joinColumns) {
    const column = item.metadata.columns.find(
      (candidate) =>
        candidate.databaseName === joinColumn.databaseName &&
        candidate.propertyName !== relation.propertyName,
    )
    const value: unknown = column && item.entity[column.propertyName]
    if (value !== undefined && value !== null) return value
  }
  return undefined
}

function lists(children: unknown, child: object): boolean {
  return children === child || (Array.isArray(children) && children.includes(child))
}

function isOf(metadata: EntityMetadata, expected: EntityMetadata): boolean {
  return metadata === expected || metadata.inheritanceTree.includes(expected.target as never)
}

function parentId(parent: object, relation: RelationMetadata | undefined): unknown {
  if (relation) return relation.inverseEntityMetadata.primaryColumns[0]?.getEntityValue(parent)
  const sharded = findShardedId(parent.constructor)
  return (parent as ObjectLiteral)[sharded?.propertyName ?? 'id']
}

/** A parent listing a child in one of its relations. */
interface Listing {
  readonly parent: object
  readonly via: RelationMetadata
}

/**
 * Child → parents for every entity the `save()` calls of `batch` reach through one-to-many (and
 * inverse one-to-one) relations, walking from the entities handed to `save()`.
 */
function parentsInGraph(batch: readonly Pending[]): Map<object, Listing[]> {
  const parents = new Map<object, Listing[]>()
  const seen = new Set<object>()
  for (const roots of new Set(batch.map((item) => item.roots))) {
    if (!roots) continue
    const stack: [object, EntityMetadata | undefined][] = (
      Array.isArray(roots.entity) ? roots.entity : [roots.entity]
    )
      .filter(isObject)
      .map((entity) => [entity, roots.target])
    while (stack.length > 0) {
      const [entity, declared] = stack.pop()!
      if (seen.has(entity)) continue
      seen.add(entity)
      const metadata = roots.metadataOf(entity) ?? declared
      if (!metadata) continue
      for (const relation of metadata.relations) {
        const value: unknown = relation.getEntityValue(entity)
        const related = Array.isArray(value)
          ? value.filter(isObject)
          : isObject(value)
            ? [value]
            : []
        for (const child of related) {
          if (relation.isOneToMany || relation.isOneToOneNotOwner) {
            const listings = parents.get(child) ?? []
            listings.push({ parent: entity, via: relation })
            parents.set(child, listings)
          }
          stack.push([child, relation.inverseEntityMetadata])
        }
      }
    }
  }
  return parents
}

function isObject(value: unknown): value is object {
  return typeof value === 'object' && value !== null
}
