import {
  ConfigurationError,
  checkKnownOptions,
  checkShardColumn,
  checkShardRule,
  describeValue,
  InvalidShardRuleError,
  type ShardRule,
  type StringKeyMode,
  shardByOnShardedIdError,
} from '@shardflake/core'

/**
 * What the extension knows about the models of a Prisma schema. `prisma generate` writes it
 * (see the `shardflake` generator); without the generator, write it by hand.
 *
 * Keys are model names as in the schema (`Post`, not the table name). List every model whose
 * ID is sharded, and every model whose nested writes may create one (with its `relations`).
 *
 * @example Written by hand (the fallback for apps that do not run the generator)
 * ```ts
 * import type { ShardedModels } from '@shardflake/prisma'
 *
 * const models = {
 *   User: { id: 'id', rule: { shardBy: 'email' }, relations: { posts: { model: 'Post', list: true } } },
 *   Post: {
 *     id: 'id',
 *     rule: { sameShardAs: 'user' },
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
   * Where a new row's shard comes from, naming fields or relations of this model:
   * `{ shardBy: 'email' }` (a plain key), `{ sameShardAs: 'post' }` or `{ sameShardAs: 'postId' }`
   * (the parent's shard, read from its ID) or `{ shard: 3 }`. Required with `id`.
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
  /** An `Int` field that receives the logical shard of the row's ID. */
  readonly shardColumn?: string
}

const ANNOTATION = /@shardedId\b\s*(?:\(([^)]*)\))?/g
/**
 * Anything that looks like an attempt at the annotation: `@shardedid`, `@shardedIds`, `@shardId`,
 * `@sharded` (but not a word such as `@shardflake`).
 */
export const LOOKALIKE = /@shard(?:ed)?(?:[_-]?ids?)?(?![\w/.-])/gi

/**
 * Reads `@shardedId(shardBy: email)`, `@shardedId(sameShardAs: post)` or `@shardedId(shard: 3)`
 * (plus `stringKeys: hash`, and `shardColumn: lshard`, an `Int` field that receives the ID's
 * logical shard) out of a field's `///` documentation. Returns `undefined` when the
 * documentation has no annotation.
 * @throws InvalidShardRuleError for a malformed or misspelt annotation (`@shardedid`, unknown
 *   arguments, two rules), so a typo fails `prisma generate` instead of leaving the model unsharded.
 */
export function parseShardedId(
  documentation: string | undefined,
  where: string,
): ShardedIdAnnotation | undefined {
  if (!documentation) return undefined
  for (const [token] of documentation.matchAll(LOOKALIKE)) {
    if (token !== '@shardedId') {
      throw new InvalidShardRuleError(
        `${where}: unknown annotation ${token}. The annotation is spelt @shardedId(shardBy: <field>), @shardedId(sameShardAs: <relation>) or @shardedId(shard: <n>).`,
      )
    }
  }
  const matches = [...documentation.matchAll(ANNOTATION)]
  if (matches.length === 0) return undefined
  if (matches.length > 1) throw new InvalidShardRuleError(`${where}: @shardedId appears twice.`)
  const match = matches[0]!
  const entries: Record<string, string> = {}
  for (const part of (match[1] ?? '').split(',')) {
    if (!part.trim()) continue
    const [key, value, ...rest] = part.split(':').map((s) => s.trim().replace(/^["']|["']$/g, ''))
    if (!key || !value || rest.length > 0) {
      throw new InvalidShardRuleError(`${where}: cannot read "${part.trim()}" in ${match[0]}.`)
    }
    entries[key] = value
  }
  const { shardBy, sameShardAs, shard, stringKeys, shardColumn, ...unknown } = entries
  const extra = Object.keys(unknown)
  if (extra.length > 0) {
    throw new InvalidShardRuleError(
      `${where}: unknown ${extra.join(', ')} in ${match[0]} (use shardBy, sameShardAs, shard, stringKeys, shardColumn).`,
    )
  }
  const rules = [shardBy, sameShardAs, shard].filter((value) => value !== undefined)
  if (rules.length !== 1) {
    throw new InvalidShardRuleError(
      `${where}: ${match[0]} needs exactly one of shardBy: <field>, sameShardAs: <relation or foreign key> or shard: <number>.`,
    )
  }
  if (stringKeys !== undefined && ((stringKeys !== 'auto' && stringKeys !== 'hash') || !shardBy)) {
    throw new InvalidShardRuleError(
      `${where}: stringKeys goes with shardBy and is auto or hash, got ${describeValue(stringKeys)}.`,
    )
  }
  if (shard !== undefined && !/^\d+$/.test(shard)) {
    throw new InvalidShardRuleError(
      `${where}: shard must be a non-negative integer, got ${describeValue(shard)}.`,
    )
  }
  return {
    ...(shardBy !== undefined && { shardBy }),
    ...(sameShardAs !== undefined && { sameShardAs }),
    ...(shard !== undefined && { shard: Number(shard) }),
    ...(stringKeys !== undefined && { stringKeys }),
    ...(shardColumn !== undefined && { shardColumn }),
  }
}

/**
 * The relation that `field` (a relation name or one of its foreign keys) goes through, and the
 * foreign key itself.
 */
function relationOf(
  meta: ModelMetadata,
  field: string,
): { name: string; relation: RelationMetadata; key: string | undefined } | undefined {
  const relations = meta.relations ?? {}
  const named = relations[field]
  if (named) {
    return {
      name: field,
      relation: named,
      key: named.fields?.length === 1 ? named.fields[0] : undefined,
    }
  }
  for (const [name, relation] of Object.entries(relations)) {
    if (relation.fields?.includes(field)) return { name, relation, key: field }
  }
  return undefined
}

/**
 * The rule of model `name` with relation names replaced by their foreign key, after checking
 * it means what it says: `shardBy` on a key that holds a sharded parent's ID is refused (its
 * shard is in the ID's bits, not in its value modulo logicalShards), and `sameShardAs` must reach
 * a parent whose ID is sharded.
 * @throws InvalidShardRuleError
 */
function resolveRule(models: ShardedModels, name: string, meta: ModelMetadata): ShardRule {
  const rule = checkShardRule(meta.rule, name) as ShardRule
  checkShardColumn(rule, name, { idField: meta.id })
  if ('shard' in rule) return rule
  const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof ref !== 'string') return rule
  if (ref === meta.id) {
    throw new InvalidShardRuleError(
      `${name}: the shard rule names the ID '${ref}' itself, which the rule is there to make.`,
    )
  }
  const via = relationOf(meta, ref)
  const parent = via ? models[via.relation.model] : undefined
  const pointsToShardedId =
    via !== undefined &&
    parent?.id !== undefined &&
    via.key !== undefined &&
    via.relation.references?.[via.relation.fields!.indexOf(via.key)] === parent.id
  if ('shardBy' in rule) {
    if (pointsToShardedId) {
      throw shardByOnShardedIdError(name, ref, via.relation.model, via.name)
    }
    if (via && !via.key) {
      throw new InvalidShardRuleError(
        `${name}: shardBy '${ref}' is a relation without exactly one foreign-key field; name the field.`,
      )
    }
    return via?.key && via.key !== ref ? { ...rule, shardBy: via.key } : rule
  }
  if (via && !pointsToShardedId) {
    throw new InvalidShardRuleError(
      `${name}: sameShardAs '${ref}' reads the shard from ${via.relation.model}'s ID, but ${parent?.id === undefined ? `${via.relation.model} has no sharded ID (no @shardedId)` : `'${ref}' does not hold ${via.relation.model}.${parent.id}`}. Use shardBy for a plain key.`,
    )
  }
  return via?.key && via.key !== ref ? { ...rule, sameShardAs: via.key } : rule
}

/**
 * Checks `models` (rules on sharded models, relations to listed models, rules that mean what they
 * say) and returns them with every rule naming a field: a relation in `sameShardAs` (or a
 * plain-keyed relation in `shardBy`) becomes its foreign key.
 * @throws ConfigurationError for inconsistent metadata.
 * @throws InvalidShardRuleError for a rule that is missing, malformed, or `shardBy` on a key
 *   that holds a sharded parent's ID (use `sameShardAs`).
 * @throws InvalidArgumentError for a misspelt property of a model, a rule or a relation.
 */
export function checkModels<M extends ShardedModels>(models: M): M {
  if (!models || typeof models !== 'object') {
    throw new ConfigurationError(
      'shardedIds needs `models`: the metadata `prisma generate` writes (generator shardflake), or an object written by hand.',
    )
  }
  const checked: Record<string, ModelMetadata> = {}
  for (const [name, model] of Object.entries(models)) {
    checkKnownOptions(`Model ${name} of the shardedIds models`, model, ['id', 'rule', 'relations'])
    if (model.rule) checkShardRule(model.rule, name, [])
    for (const [field, relation] of Object.entries(model.relations ?? {})) {
      checkKnownOptions(`Relation ${name}.${field} of the shardedIds models`, relation, [
        'model',
        'list',
        'relationName',
        'fields',
        'references',
      ])
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
    checked[name] =
      model.id === undefined ? model : { ...model, rule: resolveRule(models, name, model) }
  }
  return checked as M
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
