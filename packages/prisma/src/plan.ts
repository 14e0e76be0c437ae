import {
  allocateIds,
  ConfigurationError,
  checkKeyChange,
  checkShardColumnChange,
  checkSuppliedId,
  describeShardRule,
  fillShardColumn,
  type IdSource,
  InvalidArgumentError,
  MissingShardKeyError,
  type Sharding,
  ShardKeyChangedError,
  setShardColumn,
  stringifyIds,
  suppliedIdsTrusted,
  toBigInt,
} from '@shardflake/core'
import type { ModelMetadata, ShardedModels } from './metadata'
import { adoptRouted } from './routed-rows'
import {
  type ExistingRow,
  type KeyChange,
  linkRow,
  lookup,
  type NewRow,
  NO_LINKS,
  type Question,
  type Row,
  shardOf,
} from './rows'
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
  private readonly keyChanges: KeyChange[] = []
  /** Updates that write a model's shard column: the value must stay the stored ID's shard. */
  private readonly columnChanges: { target: ExistingRow; value: unknown; operation: string }[] = []
  /** True inside a transaction: rows it wrote are not visible to `find`. */
  private inTransaction = false
  /**
   * `false` when the router sent these rows through a server's client without the home check
   * (it checked their homes itself): no note for that check is needed.
   */
  homeChecked = true

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
        this.update(model, args.update, args.where, 'maybe', 'upsert')
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

  /** Every collected new row that has an ID (all of them after {@link assign}), in order. */
  newRows(): { model: string; id: bigint; data: Data }[] {
    const out: { model: string; id: bigint; data: Data }[] = []
    for (const row of this.rows) {
      if (row.id !== undefined) out.push({ model: row.model, id: row.id, data: row.data })
    }
    return out
  }

  /** The collected new rows, in the order the walk met them (a `createMany`'s: its `data`'s). */
  placedRows(): readonly NewRow[] {
    return this.rows
  }

  /**
   * Takes the placement of rows the router placed and handed this client with their IDs (see
   * `routed-rows.ts`): those IDs need no check against their rules.
   */
  adoptRouted(sharding: Sharding): this {
    this.homeChecked = adoptRouted(sharding, this.rows)
    return this
  }

  /**
   * The rows of a `createMany` / `createManyAndReturn` `data` list sorted by ID, when every row
   * has one and they are not in that order already; else `undefined`. A multi-row INSERT in ID
   * order appends to the primary key's B-tree (InnoDB clusters rows by it) instead of splitting
   * pages in the middle, as rows of interleaved shards do.
   */
  sortedById(data: unknown): { sorted: unknown[]; rows: NewRow[] } | undefined {
    if (!Array.isArray(data) || data.length < 2) return undefined
    const rows = this.rowsOfData(data)
    if (!rows) return undefined
    let ascending = true
    for (let i = 1; i < rows.length && ascending; i++) ascending = rows[i - 1]!.id! < rows[i]!.id!
    if (ascending) return undefined
    const ids = rows.map((row) => row.id!)
    const order = rows.map((_, i) => i).sort((a, b) => (ids[a]! < ids[b]! ? -1 : 1))
    return { sorted: order.map((i) => data[i]), rows: order.map((i) => rows[i]!) }
  }

  /**
   * The collected row of each item of a `createMany` `data` list, when every item is one with an
   * ID; else `undefined`.
   */
  rowsOfData(data: readonly unknown[]): NewRow[] | undefined {
    const rows = this.rows
    let aligned = rows.length === data.length
    for (let i = 0; i < data.length && aligned; i++) aligned = rows[i]!.data === data[i]
    if (aligned) return rows.every((row) => row.id !== undefined) ? rows : undefined
    const byData = new Map<unknown, NewRow>()
    for (const row of rows) if (row.id !== undefined) byData.set(row.data, row)
    const found: NewRow[] = []
    for (const item of data) {
      const row = byData.get(item)
      if (!row) return undefined
      found.push(row)
    }
    return found
  }

  /** True when no collected row needs an ID, and nothing the caller gave needs a check. */
  get empty(): boolean {
    return (
      this.rows.every(
        (row) =>
          row.id !== undefined &&
          (!row.given || (row.verified === true && !row.meta.rule?.shardColumn)),
      ) &&
      this.keyChanges.length === 0 &&
      this.columnChanges.length === 0
    )
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
   * Places every row, answering questions with `find` first, checks the IDs the caller gave and
   * the keys updates write, then allocates; throws before allocating anything if a key is
   * missing or an ID is on the wrong shard.
   */
  async assign(source: IdSource, find: FindField, inTransaction = false): Promise<void> {
    this.inTransaction = inTransaction
    const sharding = source.sharding
    let open = this.rows.filter((row) => row.id === undefined)
    // A source without a sharding (ticket servers) makes plain IDs with no shard in them: every
    // row asks it for shard 0 and shard rules do not apply, as in the other adapters.
    if (!sharding) for (const row of open) row.shard = 0
    // The shard column of a row with its ID is the ID's shard, trusted IDs too.
    if (sharding) {
      for (const row of this.rows) {
        const column = row.meta.rule?.shardColumn
        if (column && row.id !== undefined) {
          fillShardColumn(sharding, row.data, column, row.id, describeRow(row))
        }
      }
    }
    let unchecked = sharding && (!suppliedIdsTrusted() || this.columnChanges.length > 0)
    while (open.length > 0 || unchecked) {
      const questions = sharding ? this.place(open, sharding) : []
      if (questions.length === 0 && unchecked) {
        // Every row that can be placed is: check what the caller gave against the rules.
        questions.push(...this.check(sharding!))
        unchecked = questions.length > 0
      }
      if (questions.length > 0) {
        for (const question of questions) await this.answer(question, find)
        open = this.rows.filter((row) => row.id === undefined)
        continue
      }
      if (open.length === 0) return
      const ready = open.filter((row) => row.shard !== undefined)
      if (ready.length === 0) {
        throw new ConfigurationError(
          `The shards of ${open.map((row) => row.model).join(', ')} depend on each other in a cycle.`,
        )
      }
      const shards = ready.map((row) => row.shard!)
      for (const row of ready) {
        // Checked before the IDs are allocated: each ID to come is on its row's shard.
        const column = sharding && row.meta.rule?.shardColumn
        if (column) setShardColumn(row.data, column, row.shard!, describeRow(row))
      }
      const ids = await allocateIds(source, shards, undefined, { singleNextId: true })
      ready.forEach((row, i) => {
        row.id = ids[i]!
        row.data[row.meta.id!] = ids[i]!
      })
      open = open.filter((row) => row.id === undefined)
    }
  }

  /**
   * Checks every ID the caller gave a new row against the shard its rule gives, and every update
   * of a field a rule reads against the stored row's ID, as far as the rows placed so far tell.
   * Returns the questions the database must answer first (which row a `where` names, which parent
   * a `connect` names).
   * @throws ShardKeyChangedError for an update moving a stored row to another shard
   * @throws MisplacedIdError for a caller's ID on another shard than its rule gives
   */
  private check(sharding: Sharding): Question[] {
    const questions: Question[] = []
    const ask = (question: Question) => {
      if (!questions.some((q) => q.row === question.row && q.name === question.name)) {
        questions.push(question)
      }
    }
    for (const { target, value, operation } of this.columnChanges) {
      const id = lookup(target, target.meta.id!)
      if (id && 'ask' in id) ask(id.ask)
      if (id && 'value' in id) {
        const column = target.meta.rule!.shardColumn!
        checkShardColumnChange(
          sharding,
          id.value,
          column,
          value,
          `${target.model} (shardColumn '${column}'), by ${operation}()`,
        )
      }
    }
    if (suppliedIdsTrusted()) return questions
    for (const change of this.keyChanges) {
      const { target, after, operation } = change
      const id = lookup(target, target.meta.id!)
      const shard = ruleShard(after, sharding)
      if (id && 'ask' in id) ask(id.ask)
      if (typeof shard === 'object') ask(shard)
      if (id && 'value' in id && typeof shard === 'number') {
        checkKeyChange(sharding, id.value, shard, `${describeRow(after)}, by ${operation}()`)
      }
    }
    if (questions.length > 0) return questions
    for (const row of this.rows) {
      // A row the router placed by the key it still holds is on that key's shard already.
      if (!row.given || row.verified) continue
      const shard = ruleShard(row, sharding)
      if (typeof shard === 'object') ask(shard)
      else checkSuppliedId(sharding, row.id, shard, describeRow(row))
    }
    return questions
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
      linkRow(
        row,
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
    const kept = this.keyChanges.filter((change) => !dropped.has(change.target))
    this.keyChanges.splice(0, this.keyChanges.length, ...kept)
    const columns = this.columnChanges.filter((change) => !dropped.has(change.target))
    this.columnChanges.splice(0, this.columnChanges.length, ...columns)
  }

  private create(
    model: string,
    data: unknown,
    parent?: { field: string; row: Row },
    nested = true,
  ) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return []
    // A createMany row (no nested walk, no parent) shares the empty map until it links a parent.
    const links = nested || parent ? new Map<string, Row>() : NO_LINKS
    const row: NewRow = { kind: 'new', model, meta, data, links }
    if (parent) links.set(parent.field, parent.row)
    checkNumbers(this.models, model, meta, data)
    if (meta.id !== undefined) {
      const given = data[meta.id]
      if (given !== undefined && given !== null) {
        row.id = toBigInt(given, `The ID of ${model}`)
        row.given = true
      }
      this.rows.push(row)
    }
    if (nested) this.nested(row, data)
    return [row]
  }

  private update(
    model: string,
    data: unknown,
    where: unknown,
    askable: ExistingRow['askable'],
    operation = 'update',
  ) {
    const meta = this.models[model]
    if (!meta || !isObject(data)) return
    const known = isObject(where) ? where : {}
    const row: ExistingRow = {
      kind: 'existing',
      model,
      meta,
      data: known,
      links: new Map(),
      askable,
    }
    checkNumbers(this.models, model, meta, data)
    this.nested(row, data)
    const column = meta.id === undefined ? undefined : meta.rule?.shardColumn
    if (column && data[column] !== undefined) {
      const value = data[column]
      if (isObject(value) && !('set' in value)) {
        throw new ShardKeyChangedError(
          `${model}.${column} is the shard column of ${model}, and this update changes it with ${Object.keys(value).join(', ')}: it must stay the shard of the row's ID. Nothing was written. Leave it out of updates.`,
        )
      }
      const target: ExistingRow = { ...row, askable: askable && 'maybe' }
      this.columnChanges.push({ target, value: setValue(value), operation })
    }
    const after = rowAfter(meta, model, data, row.links)
    if (after) {
      // The stored row is read like an upsert's: no row, nothing to check (Prisma reports it).
      const target: ExistingRow = { ...row, askable: askable && 'maybe' }
      this.keyChanges.push({ target, after, operation })
    }
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
          if (holdsKey) linkRow(row, field, created)
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
        this.update(
          relation.model,
          item.update,
          item.where,
          isObject(item.where) && 'maybe',
          'upsert',
        )
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

/** A row and its rule, for messages: `Post (sameShardAs 'authorId')`. */
function describeRow(row: Row): string {
  return `${row.model} (${describeShardRule(row.meta.rule as never)})`
}

/**
 * The shard `row`'s rule gives, a question for the database, or `undefined` when it cannot be
 * evaluated (a key or parent is not set, or waits for a parent's ID).
 */
function ruleShard(row: NewRow, sharding: Sharding): number | Question | undefined {
  try {
    return shardOf(row, sharding)
  } catch (error) {
    if (error instanceof MissingShardKeyError) return undefined
    throw error
  }
}

/** Refuses a `number` above 2^53 as a sharded ID or a key holding one: it has lost digits. */
function checkNumbers(models: ShardedModels, model: string, meta: ModelMetadata, data: Data) {
  for (const field of walkOf(models, model, meta).shardedKeys) {
    const value = setValue(data[field])
    if (typeof value === 'number') toBigInt(value, `${model}.${field}`)
  }
  if (meta.id !== undefined) {
    const value = setValue(data[meta.id])
    if (typeof value === 'number') toBigInt(value, `The ID of ${model}`)
  }
}

/** A scalar update's value: `value` itself, or the `set` of `{ set: value }`. */
function setValue(value: unknown): unknown {
  return isObject(value) && 'set' in value ? value.set : value
}

/**
 * The fields an update of a sharded model writes that its rule reads, as a row the rule can be
 * applied to; `undefined` when it writes none of them (or the rule is a function, which reads
 * the whole row: not checked).
 * @throws ShardKeyChangedError for arithmetic (`increment`, ...) on a `shardBy` key: the new key
 *   is not known before the write, and it moves the row off its ID's shard.
 */
function rowAfter(
  meta: ModelMetadata,
  model: string,
  data: Data,
  links: Map<string, Row>,
): NewRow | undefined {
  const rule = meta.rule
  if (meta.id === undefined || !rule || 'shard' in rule) return undefined
  const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof field !== 'string') return undefined
  const relations = Object.entries(meta.relations ?? {}).filter(([, relation]) =>
    relation.fields?.includes(field),
  )
  const touched = field in data || relations.some(([name]) => name in data)
  if (!touched) return undefined
  const value = data[field]
  if (isObject(value) && !('set' in value) && !suppliedIdsTrusted()) {
    throw new ShardKeyChangedError(
      `${model}.${field} is the shard key of ${model}, and this update changes it with ${Object.keys(value).join(', ')}: the row would keep its ID on the shard of the old key. Nothing was written. Keep shard keys out of arithmetic updates.`,
    )
  }
  const fields: Data = { [field]: setValue(value) }
  for (const [name] of relations) if (name in data) fields[name] = data[name]
  return { kind: 'new', model, meta, data: fields, links }
}
