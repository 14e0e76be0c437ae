import {
  allocateAscending,
  allocateIds,
  ConfigurationError,
  checkKeyChange,
  checkKnownOptions,
  checkShardColumnChange,
  checkSuppliedId,
  describeShardRule,
  fillShardColumn,
  type IdSource,
  InvalidArgumentError,
  MissingShardKeyError,
  ShardConflictError,
  ShardKeyChangedError,
  type ShardRule,
  setShardColumn,
  shardColumnOf,
  suppliedIdsTrusted,
  toBigInt,
  toSigned64,
} from '@shardflake/core'
import {
  type Model,
  type ModelStatic,
  QueryTypes,
  type Sequelize,
  type Transaction,
} from 'sequelize'
import { checkDefinition, checkRule } from './checks'
import { collectNodes, hasIncludes, type Node, Placement } from './placement'
import { type ShardedKey, shardedKeyOf } from './sharded-id'

type AnyModel = ModelStatic<Model>

/** What {@link shardedIds} takes. */
export interface ShardedIdsOptions {
  /**
   * Where IDs come from: `InProcessSource` (no round trip), `PostgresSource`, `MysqlSource`,
   * `RedisSource`, `LeasedSource`, any of them behind a `PrefetchSource`, ... Shard keys are placed
   * with its `sharding` (the application's `defineSharding({ layout, logicalShards })`).
   */
  readonly source: IdSource
}

/** The options `Model.upsert()` hands its `beforeUpsert` hooks. */
interface UpsertOptions {
  model?: AnyModel
  instance?: Model
  fields?: PropertyKey[]
  transaction?: Transaction | null
}

/** The options of a create that Sequelize hands its hooks and later reads. */
interface WriteOptions {
  fields?: PropertyKey[]
  transaction?: Transaction | null
}

const installed = new WeakMap<Sequelize, ShardedIds>()

/**
 * What a write's hook placed, in order, kept on the array of instances the hook was handed (a
 * bulk create's own array, never yours): the home check that runs after it takes each row's shard
 * from there while the row still holds the ID, instead of a lookup per row in the `WeakMap` of
 * every instance given an ID since the last collection.
 */
const PLACED = Symbol('shardflake.placedInstances')

/** The instances of one write given their IDs by its hook, in order, their IDs and shards. */
export interface PlacedInstances {
  readonly instances: readonly Model[]
  readonly ids: readonly string[]
  readonly shards: readonly number[]
}
const NUMBER_PAST_2_53 = '9007199254740993'

/**
 * Gives the rows of every model with a {@link shardedId} attribute their IDs before the INSERT.
 * Made by {@link shardedIds}; one per `Sequelize` instance.
 */
export class ShardedIds {
  readonly source: IdSource
  readonly #sequelize: Sequelize
  readonly #keys = new WeakMap<AnyModel, ShardedKey | null>()
  /** Models whose rules were checked against their associations, with how many they had. */
  readonly #checked = new WeakMap<AnyModel, number>()
  /** The ID this gave an instance (as stored in it) and its shard. */
  readonly #issued = new WeakMap<Model, { readonly id: string; readonly shard: number }>()
  /** Instances whose shard another instance's was read from. */
  readonly #parents = new WeakSet<Model>()
  #ready: Promise<void> | true | undefined

  /** @internal Made by `shardedIds()`. */
  constructor(sequelize: Sequelize, source: IdSource) {
    this.#sequelize = sequelize
    this.source = source
  }

  /** The sharded-ID attribute of a model (cached), or undefined. */
  keyOf = (model: AnyModel): ShardedKey | undefined => {
    let key = this.#keys.get(model)
    if (key === undefined) {
      key = shardedKeyOf(model) ?? null
      this.#keys.set(model, key)
    }
    return key ?? undefined
  }

  /**
   * Gives every row of `records` without a key its ID, for inserts that run no hooks
   * (`queryInterface.bulkInsert`, `{ hooks: false }`) or that take their key from the caller
   * (`Model.upsert`): ascending in record order when the source can, else one `nextIds` per shard. Records are plain objects keyed by attribute name;
   * the key is written as a decimal string. Keys already set are checked and kept.
   * @returns the same records
   * @throws MissingShardKeyError when a record's shard key or parent is not set
   * @example
   * ```ts
   * const values = { email: 'ada@example.com', name: 'Ada' }
   * await ids.assign(User, [values]) // values.id is set
   * await User.upsert(values, { fields: ['name'] }) // an update never rewrites the stored key
   * ```
   */
  async assign<R extends object>(
    model: AnyModel,
    records: R[],
  ): Promise<(R & Record<string, unknown>)[]> {
    const key = this.keyOf(model)
    if (!key) {
      throw new ConfigurationError(`${model.name} has no shardedId() attribute.`)
    }
    const instances = records.map((record) => model.build({ ...record } as Record<string, unknown>))
    await this.write(instances, {})
    const column = this.source.sharding ? shardColumnOf(key.spec.rule) : undefined
    return records.map((record, i) =>
      Object.assign(
        record,
        { [key.attribute]: instances[i]!.get(key.attribute) },
        column ? { [column]: instances[i]!.get(column) } : {},
      ),
    )
  }

  /** @internal Installs the hooks. */
  install(): void {
    for (const model of Object.values(this.#sequelize.models)) this.checkDefined(model)
    const sequelize = this.#sequelize
    // Not in afterDefine: Sequelize runs definition hooks in a promise nobody awaits, so a refusal
    // there would be an unhandled rejection. Models defined later are checked at sync() and
    // before their first write.
    sequelize.addHook('beforeBulkSync', 'shardflake', () => {
      for (const model of Object.values(sequelize.models)) this.checkModel(model)
    })
    // Sequelize validates a new instance before beforeCreate: refuse a bad model here first.
    sequelize.addHook('beforeValidate', 'shardflake', (instance) => {
      const model = instance.constructor as AnyModel
      if (this.keyOf(model)) this.checkModel(model)
    })
    sequelize.addHook('beforeCreate', 'shardflake', (instance, options) =>
      this.write([instance], options),
    )
    sequelize.addHook('beforeBulkCreate', 'shardflake', (instances, options) =>
      this.write(instances, options),
    )
    sequelize.addHook('beforeUpsert', 'shardflake', (values, options) =>
      this.checkUpsert(values, options as UpsertOptions),
    )
    sequelize.addHook('beforeUpdate', 'shardflake', (instance, options) =>
      this.checkSave(instance, options as WriteOptions),
    )
  }

  /**
   * `beforeUpdate` (`instance.save()` / `instance.update()` of a stored row, association setters
   * such as `post.setAuthor()`): a changed shard key or parent must give the shard of the row's ID.
   */
  private checkSave(instance: Model, options: WriteOptions): void {
    const model = instance.constructor as AnyModel
    const key = this.keyOf(model)
    const sharding = this.source.sharding
    if (!key || !sharding) return
    const changed = instance.changed()
    if (!changed) return
    const fields = Array.isArray(options.fields)
      ? changed.filter((field) => options.fields!.includes(field))
      : changed
    const id: unknown = instance.get(key.attribute)
    if (id === undefined || id === null) return
    const column = shardColumnOf(key.spec.rule)
    if (column && fields.includes(column)) {
      checkShardColumnChange(
        sharding,
        id,
        column,
        instance.get(column),
        `${model.name} (shardColumn '${column}'), saved`,
      )
    }
    if (suppliedIdsTrusted() || !readsRule(model, key, fields)) return
    const nodes = collectNodes([instance], this.keyOf)
    const ruleShard = new Placement(sharding, nodes, () => undefined).ruleShard(
      nodes.get(instance)!,
    )
    checkKeyChange(sharding, id, ruleShard, `${describeRow(model, key)}, saved`)
  }

  /**
   * `beforeUpsert`: Sequelize has built the INSERT and the UPDATE by now, so the row must carry
   * its ID, and the ID must stay on the shard of the row's rule: against the UPDATE when it writes
   * a field the rule reads (a stored row's ID never changes shard), against the INSERT otherwise
   * (only a new row would take the key).
   */
  private async checkUpsert(values: object, options: UpsertOptions): Promise<void> {
    const { model, instance } = options
    const key = model && this.keyOf(model)
    if (!model || !key || !instance) return
    this.checkModel(model)
    const value: unknown = Reflect.get(values, key.attribute)
    if (value === undefined || value === null) {
      throw new InvalidArgumentError(
        `${model.name}.upsert() without ${key.attribute}: Sequelize builds an upsert's INSERT before any hook runs, so it cannot get a sharded ID there. Give the row its ID first with assign() on what shardedIds() returned (await ids.assign(${model.name}, [values])), and pass fields without '${key.attribute}' so that an update never rewrites a stored key.`,
      )
    }
    const sharding = this.source.sharding
    const row = describeRow(model, key)
    const id = toBigInt(value, `The ID of ${row}`)
    const column = sharding ? shardColumnOf(key.spec.rule) : undefined
    if (column && sharding) {
      const given: unknown = Reflect.get(values, column)
      if (given === undefined || given === null) {
        throw new InvalidArgumentError(
          `${model.name}.upsert() without its shard column '${column}': Sequelize builds an upsert's INSERT before any hook runs. Fill it with assign() on what shardedIds() returned (await ids.assign(${model.name}, [values])), which sets the ID and '${column}'.`,
        )
      }
      // The INSERT writes it, and an UPDATE that lists it: the ID's shard either way.
      fillShardColumn(sharding, { [column]: given }, column, id, row)
    }
    if (!sharding || suppliedIdsTrusted()) return
    const nodes = collectNodes([instance], this.keyOf)
    const ruleShard = new Placement(sharding, nodes, () => undefined).ruleShard(
      nodes.get(instance)!,
    )
    if (ruleShard === undefined || ruleShard === sharding.layout.shardOf(id)) return
    const fields = options.fields?.map(String)
    if (!fields || readsRule(model, key, fields)) {
      checkKeyChange(sharding, id, ruleShard, `${row}, by upsert()`)
      return
    }
    // The UPDATE leaves the stored key alone: only a new row would take the mismatched key.
    const stored = await model.count({
      where: { [key.attribute]: toSigned64(id).toString() },
      transaction: options.transaction ?? null,
      logging: false,
    })
    if (stored === 0) checkSuppliedId(sharding, id, ruleShard, `${row}, by upsert()`)
  }

  private checkDefined(model: AnyModel): void {
    const key = this.keyOf(model)
    if (!key) return
    checkDefinition(model, key, this.source.sharding)
    checkRule(model, key, false)
  }

  /** All checks, once per model and set of associations. */
  private checkModel(model: AnyModel): void {
    const key = this.keyOf(model)
    if (!key) return
    const associations = Object.keys(model.associations).length
    if (this.#checked.get(model) === associations) return
    checkDefinition(model, key, this.source.sharding)
    checkRule(model, key, true)
    this.#checked.set(model, associations)
  }

  /**
   * `beforeCreate` / `beforeBulkCreate`: IDs for `roots` and for the new instances their includes
   * reach (parents first), in one allocation: ascending in row order per model when the source
   * can (in-process, leased), else one `nextIds` per shard.
   */
  private write(roots: readonly Model[], options: WriteOptions): void | Promise<void> {
    const first = roots[0]
    const model = first?.constructor as AnyModel | undefined
    if (!first || !model || (!this.keyOf(model) && !hasIncludes(first))) return
    this.checkModel(model)
    if (this.#ready !== true) {
      this.#ready ??= this.probe(options.transaction ?? undefined)
      return this.#ready.then(() => {
        this.#ready = true
        return this.write(roots, options)
      })
    }
    const nodes = collectNodes(roots, this.keyOf)
    const placement = new Placement(this.source.sharding, nodes, (parent) =>
      this.#parents.add(parent),
    )
    const isRoot = new Set(roots)
    const pending: Node[] = []
    const shards: number[] = []
    for (const node of nodes.values()) {
      const key = node.key
      if (!key) continue
      this.checkModel(node.model)
      const { instance } = node
      const current: unknown = instance.get(key.attribute)
      const root = isRoot.has(instance)
      const column = this.source.sharding ? shardColumnOf(key.spec.rule) : undefined
      if (root) includeKey(options, key.attribute)
      if (root && column) includeKey(options, column)
      if (current === undefined || current === null) {
        try {
          const shard = placement.shardOf(node)
          // The ID to come is on this shard: a shard column set to another fails before any is made.
          if (column) fillColumn(instance, column, shard, describeRow(node.model, key))
          shards.push(shard)
          pending.push(node)
        } catch (error) {
          // A nested instance whose parent is only known later gets its ID in its own hook.
          if (root || !(error instanceof MissingShardKeyError)) throw error
        }
        continue
      }
      const issued = this.#issued.get(instance)?.shard
      if (issued === undefined) {
        // The caller's ID: on the shard of the row's rule, unless inside trustSuppliedIds.
        const id = checkSuppliedId(
          this.source.sharding,
          current,
          placement.ruleShard(node),
          describeRow(node.model, key),
        )
        instance.setDataValue(key.attribute, toSigned64(id).toString())
        if (column) {
          const shard = this.source.sharding!.layout.shardOf(id)
          fillColumn(instance, column, shard, describeRow(node.model, key), "the row's ID is")
        }
        continue
      }
      if (!root || !this.source.sharding) continue
      // Given earlier in this call; its own hooks have run since: the rule as of now.
      const shard = placement.shardOf(node)
      if (shard === issued) continue
      if (this.#parents.has(instance)) {
        throw new ShardKeyChangedError(
          `${node.model.name} ${String(current)} got its ID on shard ${issued} when the create began, but its shard rule now gives shard ${shard} (a hook changed its key), and a row of the same create already took its shard from it. Nothing was written. Set the key before calling create.`,
        )
      }
      // Its shard column was filled with the shard the ID was issued on: now the rule's.
      const column2 = shardColumnOf(key.spec.rule)
      if (column2) instance.setDataValue(column2, shard)
      pending.push(node)
      shards.push(shard)
    }
    if (pending.length === 0) return
    const place = (ids: readonly bigint[]) => {
      // Noted on the hook's array only when it placed several rows: the home check of a single
      // row reads its shard from the WeakMap as cheaply.
      const noted: string[] | undefined = pending.length > 1 ? [] : undefined
      for (let i = 0; i < pending.length; i++) {
        const { instance, key } = pending[i]!
        const id = toSigned64(ids[i]!).toString()
        instance.setDataValue(key!.attribute, id)
        this.#issued.set(instance, { id, shard: shards[i]! })
        noted?.push(id)
      }
      if (noted) {
        const placed: PlacedInstances = {
          instances: pending.map((node) => node.instance),
          ids: noted,
          shards,
        }
        Reflect.defineProperty(roots, PLACED, { value: placed, configurable: true })
      }
    }
    // Several rows: ascending in row order per model when the source can (in-process, leased),
    // so a bulk INSERT appends to the primary key's B-tree as auto-increment keys do.
    const ids =
      pending.length > 1
        ? allocateAscending(this.source, shards, undefined, {
            groups: pending.map((node) => node.model),
          })
        : allocateIds(this.source, shards)
    if (Array.isArray(ids)) return place(ids)
    return ids.then(place)
  }

  /**
   * The instances of `instances` (a hook's array) that the hook gave IDs, in order, with their IDs
   * and shards; `undefined` when it gave fewer than two.
   * @internal For the routers' home check, which takes a row's shard from there while the row
   * still holds that ID.
   */
  placedIn(instances: readonly Model[]): PlacedInstances | undefined {
    return (instances as { [PLACED]?: PlacedInstances })[PLACED]
  }

  /**
   * The shard of the ID this gave `instance`, while `id` (its key attribute's value now) is still
   * that ID; `undefined` otherwise (an ID given by the caller, or changed since): read it from the ID.
   * @internal For the routers' home check, which then decodes only what it must.
   */
  issuedShardOf(instance: Model, id: unknown): number | undefined {
    const issued = this.#issued.get(instance)
    return issued !== undefined && String(id) === issued.id ? issued.shard : undefined
  }

  /**
   * Once, before the first write: BIGINT must reach JavaScript without losing precision, and a
   * MySQL/MariaDB session must be strict, or an INSERT that skips the hooks (`hooks: false`, raw
   * SQL) would store a missing key as 0 instead of failing.
   */
  private async probe(transaction: Transaction | undefined): Promise<void> {
    const sequelize = this.#sequelize
    const mysql = ['mysql', 'mariadb'].includes(sequelize.getDialect())
    const sql = mysql
      ? `SELECT CAST('${NUMBER_PAST_2_53}' AS SIGNED) AS probe, @@SESSION.sql_mode AS mode`
      : `SELECT CAST('${NUMBER_PAST_2_53}' AS BIGINT) AS probe`
    try {
      const [row] = await sequelize.query<{ probe: unknown; mode?: unknown }>(sql, {
        type: QueryTypes.SELECT,
        transaction,
        logging: false,
      })
      if (String(row?.probe) !== NUMBER_PAST_2_53 || typeof row?.probe === 'number') {
        throw new ConfigurationError(
          `BIGINT comes back from ${sequelize.getDialect()} as a ${typeof row?.probe} (${String(row?.probe)} for ${NUMBER_PAST_2_53}), which loses precision above 2^53, where every sharded ID is. ${mysql ? 'Remove supportBigNumbers: false (and bigIntAsNumber) from dialectOptions' : 'Remove the BIGINT type parser (pg.defaults.parseInt8, types.setTypeParser(20, ...))'}: Sequelize then hands BIGINT out as strings.`,
        )
      }
      if (mysql && !/\bSTRICT_(TRANS|ALL)_TABLES\b/.test(String(row?.mode))) {
        throw new ConfigurationError(
          `sql_mode ${JSON.stringify(String(row?.mode))} is not strict: an INSERT that skips the hooks (hooks: false, queryInterface.bulkInsert, raw SQL) would store a missing sharded key as 0 instead of failing. Add STRICT_TRANS_TABLES to sql_mode (the default of MariaDB 10.2.4+ and MySQL 5.7+).`,
        )
      }
    } catch (error) {
      this.#ready = undefined
      throw error
    }
  }
}

/** A model's row and its rule, for messages: `Post (sameShardAs 'author')`. */
function describeRow(model: AnyModel, key: ShardedKey): string {
  return `${model.name} (${describeShardRule(key.spec.rule as ShardRule<never>)})`
}

/** True when writing `fields` can change the shard `key`'s rule gives. */
function readsRule(model: AnyModel, key: ShardedKey, fields: readonly string[]): boolean {
  const { rule } = key.spec
  if ('shard' in rule) return false
  const field = 'shardBy' in rule ? rule.shardBy : rule.sameShardAs
  if (typeof field !== 'string') return true // a function may read anything
  const association = model.associations[field]
  return fields.includes(field) || (!!association && fields.includes(association.foreignKey))
}

/**
 * Fills an instance's shard column with `shard`, or checks the value it carries.
 * @throws MisplacedIdError, InvalidArgumentError
 */
function fillColumn(
  instance: Model,
  column: string,
  shard: number,
  row: string,
  whose?: string,
): void {
  const box: Record<string, unknown> = { [column]: instance.get(column) }
  setShardColumn(box, column, shard, row, whose)
  instance.setDataValue(column, box[column])
}

/** Makes sure the INSERT of a create lists the key (a caller may have passed `fields`). */
function includeKey(options: WriteOptions, attribute: string): void {
  if (Array.isArray(options.fields) && !options.fields.includes(attribute)) {
    options.fields.push(attribute)
  }
}

/**
 * Gives the rows of every model with a {@link shardedId} attribute their 64-bit sharded ID before
 * the INSERT, in Sequelize hooks added to this `Sequelize` instance (they run after each model's
 * own hooks):
 *
 * - `Model.create()`, `instance.save()` of a new instance, `findOrCreate()`, association
 *   `createX()`: in `beforeCreate`.
 * - `Model.bulkCreate()`: in `beforeBulkCreate`, for all rows at once: ascending in row order
 *   from an in-process or leased source when its time window allows (the INSERT appends to the
 *   primary key's B-tree as auto-increment keys do), else one `nextIds` call per shard (with
 *   `individualHooks: true` too: each row's `beforeCreate` then finds its ID).
 * - Nested creates (`include`): the whole graph in the first hook, one `nextIds` per shard:
 *   `belongsTo` parents (which Sequelize inserts first) are placed by their own rule, and children
 *   that `sameShardAs` their parent land on its shard.
 * - A synchronous source (`InProcessSource`, `LeasedSource`) costs no round trip; any other is
 *   awaited (Sequelize awaits its hooks).
 * - An ID the caller set is kept when it is on the shard of the row's rule (a 64-bit integer,
 *   stored as a decimal string); on another shard it is a `MisplacedIdError`, unless the create
 *   runs inside `trustSuppliedIds(() => ...)` (imports).
 * - A missing shard key or parent is a `MissingShardKeyError`, before anything is written.
 * - `save()` / `update()` of a stored row, and `upsert()`, that would put its key or parent on
 *   another shard than its ID's: `ShardKeyChangedError` (outside `trustSuppliedIds`).
 *
 * Checked when a model is defined, when the application syncs, and before a model's first write:
 * the key is the model's single `BIGINT` primary key, not generated, without `defaultValue`;
 * `shardBy` does not name an association or a foreign key referencing a model with a sharded ID
 * (`InvalidShardRuleError` naming `sameShardAs`); `sameShardAs` names a `belongsTo` association (or
 * its foreign key) to such a model. Before the first write, once: BIGINT reaches JavaScript as a
 * string, and a MySQL/MariaDB session is strict.
 *
 * Paths without hooks (`{ hooks: false }`, `queryInterface.bulkInsert`, raw SQL) get no ID: give
 * their rows one with `assign()`. `Model.upsert()` builds its INSERT before its hooks run: give it
 * the ID with `assign()` too (it refuses a row without one).
 *
 * @returns the installation, whose `assign(model, records)` fills keys of plain records.
 * @throws ConfigurationError for a source that is not one, a model that cannot carry a sharded ID
 * @throws InvalidShardRuleError for a rule that names the wrong thing
 * @throws ShardConflictError when this `Sequelize` instance already has `shardedIds()`
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
 * import { shardedId, shardedIds } from '@shardflake/sequelize'
 * import { DataTypes, Sequelize } from 'sequelize'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const sequelize = new Sequelize('postgres://localhost/app')
 * shardedIds(sequelize, { source: new InProcessSource({ sharding, shards: 'all' }) })
 * const User = sequelize.define('User', { id: shardedId({ shardBy: 'email' }), email: DataTypes.STRING })
 * ```
 */
export function shardedIds(sequelize: Sequelize, options: ShardedIdsOptions): ShardedIds {
  checkKnownOptions('shardedIds() options', options, ['source'])
  const { source } = options
  if (
    typeof source !== 'object' ||
    source === null ||
    typeof source.nextIds !== 'function' ||
    typeof source.nextId !== 'function'
  ) {
    throw new ConfigurationError(
      'shardedIds() needs a source: shardedIds(sequelize, { source: new InProcessSource({ sharding, shards }) }).',
    )
  }
  if (typeof sequelize?.addHook !== 'function' || typeof sequelize.define !== 'function') {
    throw new ConfigurationError(
      'shardedIds() takes the Sequelize instance first: shardedIds(sequelize, { source }).',
    )
  }
  if (installed.has(sequelize)) {
    throw new ShardConflictError(
      'shardedIds() was already called for this Sequelize instance: two installations would give the same rows IDs from two sources. Call it once, with the one source.',
    )
  }
  const ids = new ShardedIds(sequelize, source)
  ids.install()
  installed.set(sequelize, ids)
  return ids
}

/** @internal The `shardedIds()` installation of a `Sequelize` instance, if any. */
export function installationOf(sequelize: Sequelize): ShardedIds | undefined {
  return installed.get(sequelize)
}
