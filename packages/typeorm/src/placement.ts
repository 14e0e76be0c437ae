/**
 * Where each new row of one call goes: the shard rule of its entity, with `sameShardAs` parents
 * found wherever the call has them (the child's relation, a parent inserted in the same call, a
 * loaded parent of the saved graph whose one-to-many relation lists the child).
 */
import { AsyncLocalStorage } from 'node:async_hooks'
import {
  checkSuppliedId,
  describeShardRule,
  InvalidArgumentError,
  MissingShardKeyError,
  type Sharding,
  toBigInt,
} from '@shardflake/core'
import type { EntityMetadata, ObjectLiteral, RelationMetadata } from 'typeorm'
import { findShardedId, type ShardedIdEntry } from './sharded-id'

/** One row of a call: waiting for its ID, or carrying the caller's (`supplied`) to check. */
export interface Pending {
  readonly entity: ObjectLiteral
  readonly metadata: EntityMetadata
  readonly sharded: ShardedIdEntry
  /** The entities handed to the `save()` this row belongs to, when it came from one. */
  readonly roots: SaveRoots | undefined
  /** True when the caller gave the ID: it is checked against the rule, and children follow it. */
  readonly supplied: boolean
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

/** The field a `shardBy` rule reads, or undefined for other rules (functions, parents, fixed). */
export function shardByField(sharded: ShardedIdEntry): string | undefined {
  const { rule } = sharded
  return 'shardBy' in rule && typeof rule.shardBy === 'string' ? rule.shardBy : undefined
}

/**
 * The `save()` calls in progress, per async context: `shardedIds()` runs every `save()` of its
 * DataSource inside one, so a hook can find loaded parents the call does not insert.
 */
export const saveRoots = new AsyncLocalStorage<SaveRoots>()

/** Places the rows of one call, each once; parents before their children. */
export class Placement {
  private readonly byEntity: Map<ObjectLiteral, Pending>
  private batchParents: Map<object, Listing[]> | undefined
  private graphParents: Map<object, Listing[]> | undefined

  constructor(
    private readonly sharding: Sharding | undefined,
    private readonly batch: readonly Pending[],
  ) {
    this.byEntity = new Map(batch.map((item) => [item.entity, item]))
  }

  /**
   * Checks every ID the caller gave a row of the call against the shard its rule gives, before
   * anything is allocated; a row whose rule cannot be evaluated (no key, no parent) keeps its ID.
   * Children of such rows then follow the ID's shard.
   * @throws MisplacedIdError (outside `trustSuppliedIds`)
   */
  checkSuppliedIds(): void {
    const supplied = this.batch.filter((item) => item.supplied)
    const sharding = this.sharding
    for (const item of supplied) {
      const id = toBigInt(item.entity[item.sharded.propertyName], `The ID of ${item.metadata.name}`)
      item.shard = sharding ? sharding.layout.shardOf(id) : 0
    }
    if (!sharding) return
    for (const item of supplied) {
      checkSuppliedId(
        sharding,
        item.entity[item.sharded.propertyName],
        this.ruleShard(item),
        describeRow(item),
      )
    }
  }

  /** The shard `item`'s rule gives as the row is now, or undefined when a key or parent is missing. */
  ruleShard(item: Pending): number | undefined {
    try {
      return this.evaluate(item)
    } catch (error) {
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
  }

  shardOf(item: Pending): number {
    if (item.shard !== undefined) return item.shard
    if (!this.sharding) return 0 // IDs without a shard field (ticket servers)
    const shard = this.evaluate(item)
    item.shard = shard
    return shard
  }

  /** Applies `item`'s rule, whatever ID it has. */
  private evaluate(item: Pending): number {
    const sharding = this.sharding!
    if (item.resolving) {
      throw new MissingShardKeyError(
        `The sameShardAs rule of ${item.metadata.name} points back at itself through its parents.`,
      )
    }
    item.resolving = true
    try {
      const { rule } = item.sharded
      return 'sameShardAs' in rule
        ? this.parentShard(item, rule.sameShardAs as string | ((entity: unknown) => unknown))
        : sharding.resolveShard(rule, item.entity, item.metadata.name)
    } finally {
      item.resolving = false
    }
  }

  /**
   * The shard of `item`'s parent: the one its relation, foreign key or function names, and every
   * parent of the call that lists it on the inverse (one-to-many) side. TypeORM writes a child
   * listed by a parent under that parent, whatever the child's own relation says, and under the
   * last one when two list it; so when those parents are on different shards the call is refused.
   */
  private parentShard(item: Pending, ref: string | ((entity: unknown) => unknown)): number {
    const what = `sameShardAs ${typeof ref === 'function' ? '(function)' : `'${ref}'`}`
    let parent: unknown = typeof ref === 'function' ? ref(item.entity) : item.entity[ref]
    let relation: RelationMetadata | undefined
    if (typeof ref === 'string') {
      relation = relationOf(item.metadata, ref)
      if ((parent === undefined || parent === null) && relation) {
        parent = relation.getEntityValue(item.entity) ?? foreignKeyOf(item, relation)
      }
    }
    const listing = relation ? this.listingParents(item, relation) : []
    const parents = [
      ...(parent === undefined || parent === null ? [] : [parent]),
      ...listing.filter((candidate) => candidate !== parent),
    ]
    if (parents.length === 0) {
      throw new MissingShardKeyError(
        `The parent of ${item.metadata.name} (${what}) is missing: the row's shard comes from it. Set the relation or its foreign key before saving.`,
      )
    }
    const shards = parents.map((candidate) => this.parentShardOf(candidate, item, relation, what))
    if (shards.some((shard) => shard !== shards[0])) {
      throw new InvalidArgumentError(
        `A new ${item.metadata.name} has ${parents.length} parents in one call (its ${what} and ${listing.length === parents.length ? '' : 'another '}${relation?.inverseEntityMetadata.name ?? 'parent'} listing it in ${relation?.inverseRelation?.propertyName ?? 'a one-to-many relation'}), on shards ${[...new Set(shards)].join(' and ')}. TypeORM writes it under one of them, which its ID might not name, so nothing was written. Give each new ${item.metadata.name} one parent.`,
      )
    }
    return shards[0]!
  }

  /** The shard of one parent: a parent ID, or a parent entity (of this call, or saved). */
  private parentShardOf(
    parent: unknown,
    item: Pending,
    relation: RelationMetadata | undefined,
    what: string,
  ): number {
    const sharding = this.sharding!
    if (typeof parent !== 'object' || parent === null) {
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

  /** Every parent of the call that lists `item` in the inverse (one-to-many) side of `relation`. */
  private listingParents(item: Pending, relation: RelationMetadata): object[] {
    const inverse = relation.inverseRelation
    if (!inverse) return []
    const matches = ({ via }: Listing) =>
      via === inverse || via.inverseRelation?.propertyPath === relation.propertyPath
    this.batchParents ??= parentsInBatch(this.batch)
    const found = new Set<object>()
    for (const listing of this.batchParents.get(item.entity) ?? []) {
      if (matches(listing)) found.add(listing.parent)
    }
    if (item.roots) {
      this.graphParents ??= parentsInGraph(this.batch)
      for (const listing of this.graphParents.get(item.entity) ?? []) {
        if (matches(listing)) found.add(listing.parent)
      }
    }
    return [...found]
  }
}

/**
 * Whether an update of these columns and relations can change the shard `sharded`'s rule gives: a
 * `shardBy` column, a `sameShardAs` relation or its foreign key, or a function or getter (which may
 * read anything).
 */
export function readsRule(
  sharded: ShardedIdEntry,
  metadata: EntityMetadata,
  columns: EntityMetadata['columns'],
  relations: EntityMetadata['relations'],
): boolean {
  const { rule } = sharded
  if ('shard' in rule) return false
  const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof field !== 'string') return true
  const relation = relationOf(metadata, field)
  if (!relation && !metadata.findColumnWithPropertyName(field)) return true // a getter
  return (
    columns.some(
      (column) =>
        column.propertyName === field ||
        relation?.joinColumns.some((join) => join.databaseName === column.databaseName),
    ) ||
    (relation !== undefined && relations.includes(relation))
  )
}

/** A row and its rule, for messages: `Post (sameShardAs 'author')`. */
export function describeRow(item: Pick<Pending, 'metadata' | 'sharded'>): string {
  return `${item.metadata.name} (${describeShardRule(item.sharded.rule as never)})`
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

/** Child → parents for the rows of `batch` that list others in one-to-many (or inverse one-to-one) relations. */
function parentsInBatch(batch: readonly Pending[]): Map<object, Listing[]> {
  const parents = new Map<object, Listing[]>()
  for (const { entity, metadata } of batch) {
    for (const via of metadata.relations) {
      if (!(via.isOneToMany || via.isOneToOneNotOwner)) continue
      const value: unknown = via.getEntityValue(entity)
      for (const child of Array.isArray(value) ? value : [value]) {
        if (!isObject(child)) continue
        const listings = parents.get(child) ?? []
        listings.push({ parent: entity, via })
        parents.set(child, listings)
      }
    }
  }
  return parents
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
