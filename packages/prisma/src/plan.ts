import {
  allocateIds,
  ConfigurationError,
  type IdSource,
  logicalShardsOf,
  resolveShard,
  toBigInt,
} from '@shardflake/core'
import {
  backRelation,
  type ModelMetadata,
  type RelationMetadata,
  type ShardedModels,
} from './metadata'

type Data = Record<string, unknown>

/** A row the operation creates. */
interface NewRow {
  readonly kind: 'new'
  readonly model: string
  readonly meta: ModelMetadata
  readonly data: Data
  /** Rows a foreign key of this row points to, by relation field (parent, nested-created parent). */
  readonly links: Map<string, Row>
  shard?: number
  id?: bigint
}

/** A row that exists already (the target of an update): only its `where` is known. */
interface ExistingRow {
  readonly kind: 'existing'
  readonly model: string
  readonly meta: ModelMetadata
  readonly data: Data
  readonly links: Map<string, Row>
}

type Row = NewRow | ExistingRow
const NOTHING: Data = {}
type Lookup = { value: unknown } | { pending: NewRow } | undefined

/** A relation field, with what the walk needs precomputed once per model. */
interface RelationEntry {
  readonly field: string
  readonly relation: RelationMetadata
  /** True when this side holds the foreign key (`@relation(fields: [...])`). */
  readonly holdsKey: boolean
  /** The relation field on the other model that points back here, when there is exactly one. */
  readonly back: string | undefined
}

/** Per model: its relation entries and the foreign keys that point to a sharded ID. */
interface ModelWalk {
  readonly relations: readonly RelationEntry[]
  readonly shardedKeys: readonly string[]
}

const walks = new WeakMap<ShardedModels, Map<string, ModelWalk>>()

/** The precomputed walk of `model`, cached per metadata object (rows are many, models few). */
function walkOf(models: ShardedModels, model: string, meta: ModelMetadata): ModelWalk {
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

const isObject = (value: unknown): value is Data =>
  typeof value === 'object' && value !== null && !Array.isArray(value)
const list = (value: unknown): unknown[] =>
  Array.isArray(value) ? value : value === undefined ? [] : [value]

/**
 * Finds every row an operation creates (top level and nested) and gives the ones without an ID
 * one, asking the source once per shard (once per level when a child is sharded by its parent's
 * new ID). Mutates the args in place.
 */
export class IdPlan {
  private readonly rows: NewRow[] = []

  constructor(private readonly models: ShardedModels) {}

  /** Collects the rows of a top-level operation. */
  operation(model: string, operation: string, args: unknown): this {
    if (!isObject(args)) return this
    switch (operation) {
      case 'create':
        this.create(model, args.data)
        break
      case 'createMany':
      case 'createManyAndReturn':
        // Prisma allows no relation writes in createMany rows: skip the nested walk.
        for (const data of list(args.data)) this.create(model, data, undefined, false)
        break
      case 'upsert':
        this.create(model, args.create)
        this.update(model, args.update, args.where)
        break
      case 'update':
        this.update(model, args.data, args.where)
        break
    }
    return this
  }

  /** Collects rows given to `createMany` (and their nested creates). */
  rowsOf(model: string, rows: readonly unknown[]): this {
    for (const data of rows) this.create(model, data)
    return this
  }

  /** True when no collected row needs an ID. */
  get empty(): boolean {
    return this.rows.every((row) => row.id !== undefined)
  }

  /**
   * Writes every collected ID into its row as a decimal string (`"1387263000905318401"`), the
   * same value. For `createMany` / `createManyAndReturn` only: Prisma compiles each of those
   * afresh (no plan cache), turns every `bigint` into a query parameter on the way and passes a
   * string to its query compiler as a literal, which it checks as a 64-bit integer and sends as
   * a `BIGINT` all the same, for about half the cost per value. Anywhere else keep the `bigint`:
   * a literal would make every `create` a plan-cache miss.
   */
  writeIdsAsText(): void {
    for (const row of this.rows) {
      if (row.id !== undefined) row.data[row.meta.id!] = row.id.toString()
    }
  }

  /** Resolves every shard, then allocates; throws before allocating anything if a key is missing. */
  async assign(source: IdSource): Promise<void> {
    const layout = source.layout
    const logicalShards = logicalShardsOf(source)
    let open = this.rows.filter((row) => row.id === undefined)
    // A source without a layout (ticket servers) makes plain IDs with no shard in them: every row
    // asks it for shard 0 and shard rules do not apply, as in the other adapters.
    if (!layout) for (const row of open) row.shard = 0
    while (open.length > 0) {
      let progress = true
      while (progress) {
        progress = false
        for (const row of open) {
          if (row.shard !== undefined || !layout) continue
          row.shard = this.shardOf(row, { layout, logicalShards, entityName: row.model })
          if (row.shard !== undefined) progress = true
        }
      }
      const ready = open.filter((row) => row.shard !== undefined)
      if (ready.length === 0) {
        throw new ConfigurationError(
          `The shards of ${open.map((row) => row.model).join(', ')} depend on each other in a cycle.`,
        )
      }
      const ids = await allocateIds(
        source,
        ready.map((row) => row.shard!),
        undefined,
        { singleNextId: true },
      )
      ready.forEach((row, i) => {
        row.id = ids[i]!
        row.data[row.meta.id!] = ids[i]!
      })
      open = open.filter((row) => row.id === undefined)
    }
  }

  private create(
    model: string,
    data: unknown,
    parent?: { field: string; row: Row },
    nested = true,
  ) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return undefined
    const row: NewRow = { kind: 'new', model, meta, data, links: new Map() }
    if (parent) row.links.set(parent.field, parent.row)
    this.checkNumbers(row)
    if (meta.id !== undefined) {
      const given = data[meta.id]
      if (given !== undefined && given !== null) row.id = toBigInt(given, `The ID of ${model}`)
      this.rows.push(row)
    }
    if (nested) this.nested(row, data)
    return row
  }

  private update(model: string, data: unknown, where: unknown) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return
    const row: ExistingRow = {
      kind: 'existing',
      model,
      meta,
      data: isObject(where) ? where : {},
      links: new Map(),
    }
    this.nested(row, data)
  }

  /** Visits the relation writes in `data`, the create or update data of `row`. */
  private nested(row: Row, data: Data) {
    for (const { field, relation, holdsKey, back } of walkOf(this.models, row.model, row.meta)
      .relations) {
      const write = data[field]
      if (!isObject(write)) continue
      const parent = back === undefined ? undefined : { field: back, row }
      const child = (value: unknown) => {
        const created = this.create(relation.model, value, parent)
        if (holdsKey && created) row.links.set(field, created)
      }
      list(write.create).forEach(child)
      if (isObject(write.createMany)) list(write.createMany.data).forEach(child)
      for (const item of list(write.connectOrCreate)) {
        if (isObject(item)) this.create(relation.model, item.create, parent)
      }
      for (const item of list(write.upsert)) {
        if (!isObject(item)) continue
        this.create(relation.model, item.create, parent)
        this.update(relation.model, item.update, item.where)
      }
      for (const item of list(write.update)) {
        if (!isObject(item)) continue
        const wrapped =
          relation.list ||
          (isObject(item.data) && Object.keys(item).every((k) => k === 'data' || k === 'where'))
        if (wrapped) this.update(relation.model, item.data, item.where)
        else this.update(relation.model, item, undefined)
      }
    }
  }

  /** The value of `field` on `row`: given, implied by a parent, or the pending ID of a new row. */
  private lookup(row: Row, field: string): Lookup {
    if (row.kind === 'new' && field === row.meta.id) {
      if (row.id !== undefined) return { value: row.id }
      return { pending: row }
    }
    const own = row.data[field]
    if (own !== undefined && own !== null && typeof own !== 'object') return { value: own }
    for (const [name, relation] of Object.entries(row.meta.relations ?? {})) {
      const index = relation.fields?.indexOf(field) ?? -1
      if (index < 0) continue
      const reference = relation.references![index]!
      const linked = row.links.get(name)
      if (linked) return this.lookup(linked, reference)
      const write = row.data[name]
      if (!isObject(write)) continue
      for (const target of [
        write.connect,
        isObject(write.connectOrCreate) && write.connectOrCreate.where,
      ]) {
        const value = isObject(target) ? target[reference] : undefined
        if (value !== undefined && value !== null && typeof value !== 'object') return { value }
      }
    }
    return undefined
  }

  /** The row's shard, or `undefined` while it waits for a parent's ID. */
  private shardOf(row: NewRow, options: Parameters<typeof resolveShard>[2]): number | undefined {
    const rule = row.meta.rule!
    if ('shard' in rule) return resolveShard(rule, row.data, options)
    const ref = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
    if (typeof ref === 'function') return resolveShard(rule, row.data, options)
    const found = this.lookup(row, ref)
    if (found && 'pending' in found) {
      if (found.pending === row) return resolveShard(rule, NOTHING, options)
      if ('sameShardAs' in rule) return found.pending.shard
      return undefined
    }
    return resolveShard(rule, { [ref]: found?.value }, options)
  }

  /** A `number` in a key that points to a sharded ID is refused when it is not a safe integer. */
  private checkNumbers(row: NewRow) {
    for (const field of walkOf(this.models, row.model, row.meta).shardedKeys) {
      const value = row.data[field]
      if (typeof value === 'number') toBigInt(value, `${row.model}.${field}`)
    }
  }
}
