import {
  backRelation,
  type ModelMetadata,
  type RelationMetadata,
  type ShardedModels,
} from './metadata'

/** Write arguments as Prisma hands them to a query hook (a copy: mutating them is safe). */
export type Data = Record<string, unknown>

/** A relation field, with what the walk needs precomputed once per model. */
export interface RelationEntry {
  readonly field: string
  readonly relation: RelationMetadata
  /** True when this side holds the foreign key (`@relation(fields: [...])`). */
  readonly holdsKey: boolean
  /** The relation field on the other model that points back here, when there is exactly one. */
  readonly back: string | undefined
}

/** Per model: its relation entries and the foreign keys that point to a sharded ID. */
export interface ModelWalk {
  readonly relations: readonly RelationEntry[]
  readonly shardedKeys: readonly string[]
}

const walks = new WeakMap<ShardedModels, Map<string, ModelWalk>>()

/** The precomputed walk of `model`, cached per metadata object (rows are many, models few). */
export function walkOf(models: ShardedModels, model: string, meta: ModelMetadata): ModelWalk {
  let cache = walks.get(models)
  if (!cache) {
    cache = new Map()
    walks.set(models, cache)
  }
  let walk = cache.get(model)
  if (!walk) {
    const relations: RelationEntry[] = []
    const shardedKeys: string[] = []
    for (const [field, relation] of Object.entries(meta.relations ?? {})) {
      const holdsKey = (relation.fields?.length ?? 0) > 0
      relations.push({
        field,
        relation,
        holdsKey,
        back: holdsKey ? undefined : backRelation(models, model, field, relation),
      })
      const target = models[relation.model]?.id
      relation.fields?.forEach((key, i) => {
        if (relation.references?.[i] === target) shardedKeys.push(key)
      })
    }
    walk = { relations, shardedKeys }
    cache.set(model, walk)
  }
  return walk
}

export const isObject = (value: unknown): value is Data =>
  typeof value === 'object' && value !== null && !Array.isArray(value)

export const list = (value: unknown): unknown[] =>
  Array.isArray(value) ? value : value === undefined ? [] : [value]

/** A scalar value (a key or ID), as opposed to a filter object or nothing. */
export const isScalar = (value: unknown): boolean =>
  value !== undefined && value !== null && typeof value !== 'object'
