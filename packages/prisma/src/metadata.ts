import { ConfigurationError, type ShardRule, type StringKeyMode } from '@shardflake/core'

/**
 * What the extension knows about the models of a Prisma schema. `prisma generate` writes it
 * (see the `shardflake` generator); without the generator, write it by hand.
 *
 * Keys are model names as in the schema (`Post`, not the table name). List every model whose
 * ID is sharded, and every model whose nested writes may create one (with its `relations`).
 *
 * @example Written by hand (the fallback for apps that do not run the generator)
 * ```ts
 * const models = {
 *   User: { id: 'id', rule: { shardBy: 'email' }, relations: { posts: { model: 'Post', list: true } } },
 *   Post: {
 *     id: 'id',
 *     rule: { shardBy: 'userId' },
 *     relations: { user: { model: 'User', fields: ['userId'], references: ['id'] } },
 *   },
 * } satisfies ShardedModels
 * ```
 */
export type ShardedModels = Readonly<Record<string, ModelMetadata>>

/** One model: its sharded ID (if any) and its relation fields. */
export interface ModelMetadata {
  /** The field holding the sharded ID. Absent for models whose ID is not sharded. */
  readonly id?: string
  /**
   * Where a new row's shard comes from, naming fields of this model: `{ shardBy: 'userId' }`,
   * `{ sameShardAs: 'postId' }` (the row goes to its parent's shard) or `{ shard: 3 }`. A foreign
   * key the row does not carry itself (a nested create, a `connect`) is read from the relation.
   * Required with `id`.
   */
  readonly rule?: ShardRule
  /** Relation fields by name, for nested writes. @default {} */
  readonly relations?: Readonly<Record<string, RelationMetadata>>
}

/** A relation field of a model. */
export interface RelationMetadata {
  /** The model on the other side. */
  readonly model: string
  /** True for a to-many field (`posts Post[]`). @default false */
  readonly list?: boolean
  /** The relation's name, to find the field on the other side. @default the only relation back */
  readonly relationName?: string
  /** Foreign-key fields on this side (`@relation(fields: [...])`). */
  readonly fields?: readonly string[]
  /** The fields they reference on the other model (`references: [...]`). */
  readonly references?: readonly string[]
}

/** A `/// @shardedId(...)` annotation, parsed. */
export interface ShardedIdAnnotation {
  readonly shardBy?: string
  readonly sameShardAs?: string
  readonly shard?: number
  readonly stringKeys?: StringKeyMode
}

const ANNOTATION = /@shardedId\b\s*(?:\(([^)]*)\))?/

/**
 * Reads `@shardedId(shardBy: userId)`, `@shardedId(sameShardAs: postId)` or
 * `@shardedId(shard: 3)` (plus `stringKeys: hash`) out of a field's `///` documentation.
 * Returns `undefined` when the documentation has no `@shardedId`.
 * @throws ConfigurationError for a malformed annotation.
 */
export function parseShardedId(
  documentation: string | undefined,
  where: string,
): ShardedIdAnnotation | undefined {
  const match = documentation ? ANNOTATION.exec(documentation) : null
  if (!match) return undefined
  const entries: Record<string, string> = {}
  for (const part of (match[1] ?? '').split(',')) {
    if (!part.trim()) continue
    const [key, value, ...rest] = part.split(':').map((s) => s.trim().replace(/^["']|["']$/g, ''))
    if (!key || !value || rest.length > 0) {
      throw new ConfigurationError(`${where}: cannot read "${part.trim()}" in ${match[0]}.`)
    }
    entries[key] = value
  }
  const { shardBy, sameShardAs, shard, stringKeys, ...unknown } = entries
  const extra = Object.keys(unknown)
  if (extra.length > 0) {
    throw new ConfigurationError(
      `${where}: unknown ${extra.join(', ')} in ${match[0]} (use shardBy, sameShardAs, shard, stringKeys).`,
    )
  }
  const rules = [shardBy, sameShardAs, shard].filter((value) => value !== undefined)
  if (rules.length !== 1) {
    throw new ConfigurationError(
      `${where}: ${match[0]} needs exactly one of shardBy: <field>, sameShardAs: <field> or shard: <number>.`,
    )
  }
  if (stringKeys !== undefined && stringKeys !== 'auto' && stringKeys !== 'hash') {
    throw new ConfigurationError(`${where}: stringKeys must be auto or hash, got ${stringKeys}.`)
  }
  if (shard !== undefined && !/^\d+$/.test(shard)) {
    throw new ConfigurationError(`${where}: shard must be a non-negative integer, got ${shard}.`)
  }
  return {
    ...(shardBy !== undefined && { shardBy }),
    ...(sameShardAs !== undefined && { sameShardAs }),
    ...(shard !== undefined && { shard: Number(shard) }),
    ...(stringKeys !== undefined && { stringKeys }),
  }
}

/**
 * Checks that `models` is consistent (rules on sharded models, relations to listed models,
 * rule fields that exist when field lists are known) and returns it.
 * @throws ConfigurationError
 */
export function checkModels<M extends ShardedModels>(models: M): M {
  if (!models || typeof models !== 'object') {
    throw new ConfigurationError(
      'shardedIds needs `models`: the metadata `prisma generate` writes (generator shardflake), or an object written by hand.',
    )
  }
  for (const [name, model] of Object.entries(models)) {
    if (model.id !== undefined && !model.rule) {
      throw new ConfigurationError(
        `Model ${name}: the sharded ID '${model.id}' has no rule (shardBy, sameShardAs or shard).`,
      )
    }
    if (model.rule && model.id === undefined) {
      throw new ConfigurationError(`Model ${name}: a rule without \`id\` (the sharded ID field).`)
    }
    for (const [field, relation] of Object.entries(model.relations ?? {})) {
      if (!models[relation.model]) {
        throw new ConfigurationError(
          `Model ${name}: relation '${field}' points to model ${relation.model}, which is not in the metadata.`,
        )
      }
      if ((relation.fields?.length ?? 0) !== (relation.references?.length ?? 0)) {
        throw new ConfigurationError(
          `Model ${name}: relation '${field}' needs as many \`references\` as \`fields\`.`,
        )
      }
    }
  }
  return models
}

/** The relation field on `relation.model` that points back to `model` through `relation`. */
export function backRelation(
  models: ShardedModels,
  model: string,
  field: string,
  relation: RelationMetadata,
): string | undefined {
  const candidates = Object.entries(models[relation.model]?.relations ?? {}).filter(
    ([other, back]) =>
      back.model === model &&
      !(relation.model === model && other === field) &&
      (relation.relationName === undefined || back.relationName === relation.relationName),
  )
  return candidates.length === 1 ? candidates[0]![0] : undefined
}
