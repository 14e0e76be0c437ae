import {
  allocateIds,
  ConfigurationError,
  type IdSource,
  InvalidArgumentError,
  MissingShardKeyError,
  type Sharding,
  stringifyIds,
  toBigInt,
} from '@shardflake/core'
import type { ShardedModels } from './metadata'
import { type ExistingRow, type NewRow, type Question, type Row, shardOf } from './rows'
import { type Data, isObject, isScalar, list, walkOf } from './walk'

/**
 * Reads `field` of the one `model` row matching `where` (a unique filter); `undefined` when there
 * is no such row. The extension reads through the Prisma client it extends.
 */
export type FindField = (model: string, where: Data, field: string) => Promise<unknown>

/**
 * Finds every row an operation creates (top level and nested) and gives the ones without an ID
 * one, asking the source once per shard (once per level when a child goes where a parent made
 * in the same call goes). Mutates the args in place.
 */
export class IdPlan {
  private readonly rows: NewRow[] = []
  /** True inside a transaction: rows it wrote are not visible to `find`. */
  private inTransaction = false

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
        this.update(model, args.update, args.where, 'maybe')
        break
      case 'update':
        this.update(model, args.data, args.where, 'exists')
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

  /**
   * Places every row, answering questions with `find` first, then allocates; throws before
   * allocating anything if a key is missing.
   */
  async assign(source: IdSource, find: FindField, inTransaction = false): Promise<void> {
    this.inTransaction = inTransaction
    const sharding = source.sharding
    let open = this.rows.filter((row) => row.id === undefined)
    // A source without a sharding (ticket servers) makes plain IDs with no shard in them: every
    // row asks it for shard 0 and shard rules do not apply, as in the other adapters.
    if (!sharding) for (const row of open) row.shard = 0
    while (open.length > 0) {
      const questions = sharding ? this.place(open, sharding) : []
      if (questions.length > 0) {
        for (const question of questions) await this.answer(question, find)
        open = this.rows.filter((row) => row.id === undefined)
        continue
      }
      const ready = open.filter((row) => row.shard !== undefined)
      if (ready.length === 0) {
        throw new ConfigurationError(
          `The shards of ${open.map((row) => row.model).join(', ')} depend on each other in a cycle.`,
        )
      }
      const shards = ready.map((row) => row.shard!)
      const ids = await allocateIds(source, shards, undefined, { singleNextId: true })
      ready.forEach((row, i) => {
        row.id = ids[i]!
        row.data[row.meta.id!] = ids[i]!
      })
      open = open.filter((row) => row.id === undefined)
    }
  }

  /** Gives every open row whose shard is known its shard; returns what the database must answer. */
  private place(open: readonly NewRow[], sharding: Sharding): Question[] {
    const questions: Question[] = []
    let progress = true
    while (progress) {
      progress = false
      for (const row of open) {
        if (row.shard !== undefined) continue
        const shard = shardOf(row, sharding)
        if (typeof shard === 'number') {
          row.shard = shard
          progress = true
        } else if (shard && !questions.some((q) => q.row === shard.row && q.name === shard.name)) {
          questions.push(shard)
        }
      }
    }
    return questions
  }

  /** Reads the answer to `question` and rewrites the arguments to match it. */
  private async answer({ row, name, relation, field }: Question, find: FindField): Promise<void> {
    if (!name || !relation) {
      const value = await find(row.model, { ...row.data }, field)
      if (!isScalar(value) && row.kind === 'existing' && row.askable === 'maybe') {
        // No such row: the upsert creates, its update branch does not run. The rows that branch
        // would create get no ID (if another writer creates the row in between, Prisma runs the
        // branch and the database refuses rows without an ID).
        this.drop(row)
        return
      }
      if (!isScalar(value)) {
        throw new MissingShardKeyError(
          `No ${row.model} with a ${field} where ${stringifyIds(row.data)}: the rows created under it have no shard.`,
        )
      }
      row.data[field] = value // pins the update to the row read
      return
    }
    const write = row.data[name] as Data
    const connect = isObject(write.connect) ? write.connect : undefined
    const choice = (connect ?? write.connectOrCreate) as Data
    const where = connect ?? (isObject(choice.where) ? choice.where : {})
    const value = await find(relation.model, { ...where }, field)
    if (isScalar(value)) {
      write.connect = { ...where, [field]: value }
      delete write.connectOrCreate
      const unused = this.rows.find((other) => other.data === choice.create)
      if (unused) this.drop(unused)
    } else if (connect) {
      throw new MissingShardKeyError(
        `${row.model}.${name}: no ${relation.model} where ${stringifyIds(where)} to connect to, so the new ${row.model} has no shard.`,
      )
    } else if (this.inTransaction) {
      // A parent this transaction created is invisible to the read: connect or create is unknown.
      throw new InvalidArgumentError(
        `${row.model}.${name}: connectOrCreate inside a transaction found no committed ${relation.model} where ${stringifyIds(where)}, and one created earlier in the transaction cannot be seen from outside it, so whether this write connects or creates (and where the new ${row.model} goes) is unknown. Use connect when the ${relation.model} exists, create when it does not.`,
      )
    } else {
      // The parent is created: the child goes where the created parent goes.
      write.create = choice.create
      delete write.connectOrCreate
      const meta = this.models[relation.model]!
      const created = this.rows.find((other) => other.data === choice.create)
      const data = isObject(choice.create) ? choice.create : {}
      row.links.set(
        name,
        created ?? { kind: 'new', model: relation.model, meta, data, links: new Map() },
      )
    }
  }

  /**
   * Forgets the rows under `root`, and `root` itself: a `connectOrCreate` that connects creates
   * nothing, an upsert that creates runs no update branch.
   */
  private drop(root: Row) {
    const dropped = new Set<Row>([root])
    let more = true
    while (more) {
      more = false
      for (const row of this.rows) {
        if (dropped.has(row)) continue
        if ([...row.links.values()].some((link) => dropped.has(link))) {
          dropped.add(row)
          more = true
        }
      }
    }
    this.rows.splice(0, this.rows.length, ...this.rows.filter((row) => !dropped.has(row)))
  }

  private create(
    model: string,
    data: unknown,
    parent?: { field: string; row: Row },
    nested = true,
  ) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return []
    const row: NewRow = { kind: 'new', model, meta, data, links: new Map() }
    if (parent) row.links.set(parent.field, parent.row)
    for (const field of walkOf(this.models, model, meta).shardedKeys) {
      const value = data[field]
      if (typeof value === 'number') toBigInt(value, `${model}.${field}`)
    }
    if (meta.id !== undefined) {
      const given = data[meta.id]
      if (given !== undefined && given !== null) row.id = toBigInt(given, `The ID of ${model}`)
      this.rows.push(row)
    }
    if (nested) this.nested(row, data)
    return [row]
  }

  private update(model: string, data: unknown, where: unknown, askable: ExistingRow['askable']) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return
    const known = isObject(where) ? where : {}
    this.nested({ kind: 'existing', model, meta, data: known, links: new Map(), askable }, data)
  }

  /** Visits the relation writes in `data`, the create or update data of `row`. */
  private nested(row: Row, data: Data) {
    for (const { field, relation, holdsKey, back } of walkOf(this.models, row.model, row.meta)
      .relations) {
      const write = data[field]
      if (!isObject(write)) continue
      const parent = back === undefined ? undefined : { field: back, row }
      const child = (value: unknown) => {
        for (const created of this.create(relation.model, value, parent)) {
          if (holdsKey) row.links.set(field, created)
        }
      }
      list(write.create).forEach(child)
      if (isObject(write.createMany)) list(write.createMany.data).forEach(child)
      for (const item of list(write.connectOrCreate)) {
        // Created or not is decided when a child's shard depends on it (see `answer`).
        if (isObject(item)) this.create(relation.model, item.create, parent)
      }
      for (const item of list(write.upsert)) {
        if (!isObject(item)) continue
        this.create(relation.model, item.create, parent)
        this.update(relation.model, item.update, item.where, isObject(item.where) && 'maybe')
      }
      for (const item of list(write.update)) {
        if (!isObject(item)) continue
        const wrapped =
          relation.list ||
          (isObject(item.data) && Object.keys(item).every((k) => k === 'data' || k === 'where'))
        if (wrapped) {
          this.update(relation.model, item.data, item.where, isObject(item.where) && 'exists')
        } else this.update(relation.model, item, undefined, false)
      }
    }
  }
}
