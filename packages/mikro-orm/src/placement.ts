import { type EntityMetadata, helper, Reference, Utils } from '@mikro-orm/core'
import {
  ConfigurationError,
  type IdInput,
  MissingShardKeyError,
  type Sharding,
  type ShardRule,
  toBigInt,
} from '@shardflake/core'
import { relationOf } from './rules'
import { shardedKeyOf } from './sharded-id'

type Row = Record<string, unknown>

/**
 * Applies the shard rules of sharded keys to new entities (or rows): the one place that decides
 * where a row goes, at `em.create()` and again at flush.
 */
export class Placement {
  /** `undefined` for sources of plain IDs without shards (ticket servers): every row is shard 0. */
  constructor(readonly sharding: Sharding | undefined) {}

  /**
   * The logical shard of a new entity (or row) by its rule, as of now.
   * @throws MissingShardKeyError when the key, or the parent, is not set
   */
  shardOf(
    entity: object,
    meta: EntityMetadata,
    key = shardedKeyOf(meta),
    visiting?: Set<object>,
  ): number {
    if (!key) throw new ConfigurationError(`${meta.className} has no sharded primary key.`)
    const sharding = this.sharding
    if (!sharding) return 0
    const rule = key.spec.rule
    const row = entity as Row
    if ('shard' in rule) return sharding.resolveShard(rule, row, meta.className)
    const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
    const relation = typeof ref === 'string' ? relationOf(meta, ref) : undefined
    if ('shardBy' in rule) {
      if (!relation) return sharding.resolveShard(rule as ShardRule<Row>, row, meta.className)
      // A relation to an entity whose key is not sharded: its key is a plain shard key.
      const pk = this.parentKey(fieldValue(row, ref as string, relation.name), relation.name, meta)
      return sharding.shardForKey(pk as bigint | number | string, rule.stringKeys)
    }
    // The entities whose rules led here: a parent met again is a cycle.
    const path = visiting ?? new Set<object>()
    path.add(entity)
    const parent = typeof ref === 'function' ? ref(row) : fieldValue(row, ref, relation?.name)
    return this.shardOfParent(parent, relation?.targetMeta, meta, String(ref), path)
  }

  /** A sharded parent's shard: read from its ID, or from its own rule while it has none. */
  private shardOfParent(
    value: unknown,
    targetMeta: EntityMetadata | undefined,
    meta: EntityMetadata,
    via: string,
    visiting: Set<object>,
  ): number {
    const sharding = this.sharding!
    const parent = unwrap(value)
    if (parent === null || parent === undefined) {
      throw new MissingShardKeyError(
        `The parent of ${meta.className} (sameShardAs '${via}') is missing: set it before flushing, or give the ID yourself.`,
      )
    }
    if (typeof parent !== 'object') {
      return sharding.shardOfId(toBigInt(parent as IdInput, `Parent ID of ${meta.className}`))
    }
    const related = Utils.isEntity(parent, true) ? helper(parent).__meta : targetMeta
    const parentKey = related ? shardedKeyOf(related) : undefined
    if (!related || !parentKey) {
      throw new ConfigurationError(
        `${meta.className}: sameShardAs '${via}' gave a ${related?.className ?? 'value'} without a sharded key.`,
      )
    }
    const id = (parent as Row)[parentKey.prop.name]
    if (id !== null && id !== undefined) {
      return sharding.shardOfId(toBigInt(id as IdInput, `${related.className} ID`))
    }
    if (visiting.has(parent)) {
      throw new ConfigurationError(`The shard rules of ${meta.className} form a cycle.`)
    }
    return this.shardOf(parent, related, parentKey, visiting)
  }

  /** The primary key of a `shardBy` relation's entity (or the key itself). */
  private parentKey(value: unknown, via: string, meta: EntityMetadata): unknown {
    const parent = unwrap(value)
    let pk: unknown = parent
    if (parent !== null && typeof parent === 'object' && Utils.isEntity(parent, true)) {
      const related = helper(parent).__meta
      pk = (parent as Row)[related.primaryKeys[0]!]
    }
    if (pk === null || pk === undefined) {
      throw new MissingShardKeyError(
        `The shard key of ${meta.className} (shardBy '${via}') is missing: set the relation, to an entity with a primary key, before flushing.`,
      )
    }
    return pk
  }
}

/** A field's value; for a foreign-key property left empty, its relation's. */
function fieldValue(row: Row, field: string, relation: string | undefined): unknown {
  const value = row[field]
  return (value === null || value === undefined) && relation ? row[relation] : value
}

function unwrap(value: unknown): unknown {
  return value !== null && typeof value === 'object' && Reference.isReference(value)
    ? value.unwrap()
    : value
}
