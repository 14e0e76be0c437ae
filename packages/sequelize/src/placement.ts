/**
 * Where each new row of one Sequelize call goes: the rule of its model, with `sameShardAs`
 * parents found wherever the call has them (the foreign key, the `belongsTo` instance it
 * includes, or the instance whose `hasMany` / `hasOne` include lists it).
 */
import {
  type IdInput,
  MissingShardKeyError,
  type Sharding,
  type ShardRule,
  toBigInt,
} from '@shardflake/core'
import { type Association, Model, type ModelStatic } from 'sequelize'
import { belongsToWithKey } from './checks'
import type { ShardedKey } from './sharded-id'

type AnyModel = ModelStatic<Model>

/** A parent that lists a new instance in one of its `hasMany` / `hasOne` includes. */
interface Listing {
  readonly parent: Model
  readonly association: Association
}

/** A new instance reached by one call. */
export interface Node {
  readonly instance: Model
  readonly model: AnyModel
  readonly key: ShardedKey | undefined
  /** The parents whose includes list it (none for most rows: made when the first one is found). */
  listedBy?: Listing[]
  shard?: number
  resolving?: boolean
}

/** One include of an instance as Sequelize validated it (`build(values, { include })`). */
interface BuiltInclude {
  readonly association: Association
  readonly as: string
}

/**
 * Every new instance one call writes: `roots` and what their `include` options reach (`belongsTo`
 * parents, `hasOne` / `hasMany` children, `belongsToMany` targets), each with the parents that
 * list it. Sequelize keeps an instance's validated includes in its `_options.include`.
 */
export function collectNodes(
  roots: readonly Model[],
  keyOf: (model: AnyModel) => ShardedKey | undefined,
): Map<Model, Node> {
  const nodes = new Map<Model, Node>()
  const visit = (instance: Model): Node => {
    const known = nodes.get(instance)
    if (known) return known
    const model = instance.constructor as AnyModel
    const node: Node = { instance, model, key: keyOf(model) }
    nodes.set(instance, node)
    for (const include of includesOf(instance)) {
      const value: unknown = instance.get(include.as)
      for (const related of Array.isArray(value) ? value : [value]) {
        if (!(related instanceof Model) || !related.isNewRecord) continue
        const child = visit(related)
        const type = include.association.associationType
        if (type === 'HasMany' || type === 'HasOne') {
          const listing = { parent: instance, association: include.association }
          if (child.listedBy) child.listedBy.push(listing)
          else child.listedBy = [listing]
        }
      }
    }
    return node
  }
  for (const root of roots) visit(root)
  return nodes
}

/** True when a new instance was built with `include` (a nested create). */
export function hasIncludes(instance: Model): boolean {
  return includesOf(instance).length > 0
}

/** What `includesOf` gives an instance built without `include` (most): one list, not one each. */
const NO_INCLUDES: readonly BuiltInclude[] = []

function includesOf(instance: Model): readonly BuiltInclude[] {
  const options: unknown = Reflect.get(instance, '_options')
  const include: unknown =
    typeof options === 'object' && options !== null ? Reflect.get(options, 'include') : undefined
  if (!Array.isArray(include) || include.length === 0) return NO_INCLUDES
  return include.filter(
    (item): item is BuiltInclude =>
      typeof item === 'object' &&
      item !== null &&
      typeof item.as === 'string' &&
      typeof item.association === 'object',
  )
}

/** Places the new instances of one call, each once; parents before their children. */
export class Placement {
  constructor(
    private readonly sharding: Sharding | undefined,
    private readonly nodes: Map<Model, Node>,
    /** Called with each instance another instance's shard was read from. */
    private readonly onParent: (parent: Model) => void,
  ) {}

  /**
   * The logical shard of a new instance of a model with a sharded ID, by its rule.
   * @throws MissingShardKeyError when its key or parent is not set
   */
  shardOf(node: Node): number {
    if (node.shard !== undefined) return node.shard
    if (!this.sharding) return 0 // plain IDs (ticket servers): no shard field
    node.shard = this.evaluate(node)
    return node.shard
  }

  /**
   * The shard `node`'s rule gives as the instance is now, whatever ID it has, or `undefined` when
   * its key or parent is not set (or the IDs carry no shard).
   */
  ruleShard(node: Node): number | undefined {
    if (!this.sharding) return undefined
    try {
      return this.evaluate(node)
    } catch (error) {
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
  }

  /** Applies `node`'s rule. */
  private evaluate(node: Node): number {
    const sharding = this.sharding!
    const name = node.model.name
    if (node.resolving) {
      throw new MissingShardKeyError(
        `The sameShardAs rule of ${name} points back at itself through its parents.`,
      )
    }
    const rule = node.key!.spec.rule
    node.resolving = true
    try {
      if ('sameShardAs' in rule) return this.parentShard(node, rule.sameShardAs)
      if ('shardBy' in rule && typeof rule.shardBy === 'string') {
        // Through get(): an attribute, a VIRTUAL attribute or a getter, whatever class fields shadow.
        const field = rule.shardBy
        const view = { [field]: node.instance.get(field) }
        return sharding.resolveShard(rule as ShardRule<typeof view>, view, name)
      }
      return sharding.resolveShard(rule as ShardRule<Model>, node.instance, name)
    } finally {
      node.resolving = false
    }
  }

  private parentShard(node: Node, ref: unknown): number {
    const { instance, model } = node
    const what = `sameShardAs ${typeof ref === 'function' ? '(function)' : `'${String(ref)}'`}`
    let parent: unknown
    if (typeof ref === 'function') {
      parent = ref(instance)
    } else {
      const name = String(ref)
      const association = model.associations[name] ?? belongsToWithKey(model, name)
      const foreignKey = association?.foreignKey ?? name
      parent = instance.get(foreignKey)
      if (isEmpty(parent) && association) parent = instance.get(association.as)
      if (isEmpty(parent)) parent = this.listingParent(node, foreignKey)
    }
    if (isEmpty(parent)) {
      throw new MissingShardKeyError(
        `The parent of ${model.name} (${what}) is missing: the row's shard comes from it. Set the association or its foreign key before creating it, or include it in the same create.`,
      )
    }
    if (!(parent instanceof Model)) {
      return this.sharding!.shardOfId(toBigInt(parent, `Parent ID of ${model.name}`))
    }
    this.onParent(parent)
    const parentModel = parent.constructor as AnyModel
    const id: unknown = parent.get(parentModel.primaryKeyAttribute)
    if (!isEmpty(id)) {
      return this.sharding!.shardOfId(toBigInt(id as IdInput, `${parentModel.name} ID`))
    }
    const inCall = this.nodes.get(parent)
    if (inCall?.key) return this.shardOf(inCall)
    throw new MissingShardKeyError(
      `The parent of ${model.name} (${what}) has no ID yet and is not created in the same call: create it first, or include it in this create.`,
    )
  }

  /** The new instance whose `hasMany` / `hasOne` include lists `node` through `foreignKey`. */
  private listingParent(node: Node, foreignKey: string): Model | undefined {
    return node.listedBy?.find(({ association }) => association.foreignKey === foreignKey)?.parent
  }
}

function isEmpty(value: unknown): value is null | undefined {
  return value === null || value === undefined
}
