import {
  type ChangeSet,
  ChangeSetType,
  type EntityManager,
  type EntityMetadata,
  type EventArgs,
  type EventSubscriber,
  EventType,
  type FlushEventArgs,
  helper,
  type MikroORM,
  Utils,
} from '@mikro-orm/core'
import {
  allocateAscending,
  ConfigurationError,
  checkKnownOptions,
  checkShardColumnChange,
  checkSuppliedId,
  fillShardColumn,
  type IdInput,
  type IdSource,
  isSyncSource,
  MissingShardKeyError,
  ShardConflictError,
  type ShardHomes,
  ShardKeyChangedError,
  setShardColumn,
  shardColumnOf,
  suppliedIdsTrusted,
  toBigInt,
} from '@shardflake/core'
import { insertInIdOrder, insertInIdOrderByDefault } from './ascending-inserts'
import {
  checkUpdate,
  databaseKeys,
  type FlushPlan,
  patchPayload,
  planFlush,
  rekey,
  ruleShard,
} from './flush'
import { IssuedKeys } from './issued-keys'
import { Placement } from './placement'
import { checkShardedKeys } from './rules'
import {
  type IdType,
  idTypeOf,
  type ShardedIdSpec,
  type SyncAssigner,
  shardedKeyOf,
} from './sharded-id'

/** Options of {@link shardedIds}. */
export interface ShardedIdsOptions {
  /**
   * Where IDs come from: `InProcessSource`, `PostgresSource`, `MysqlSource`, `RedisSource`, ...
   * Its `sharding` (the application's `defineSharding({ layout, logicalShards })`) decides every
   * shard. One `shardedIds()` per MikroORM.
   */
  readonly source: IdSource
  /**
   * The JavaScript type of keys that do not choose their own: `'string'` gives decimal strings
   * (what JSON clients need); never `number`, which loses precision above 2^53.
   * @default 'bigint'
   */
  readonly idType?: IdType
  /**
   * The common schema `installPostgres` created, left alone by `orm.schema` and the migrator.
   * @default 'shardflake'
   */
  readonly schema?: string
  /**
   * The prefix of the per-shard schemas `installPostgres` created (`shard_0`, ...), left alone
   * by `orm.schema` and the migrator.
   * @default 'shard_'
   */
  readonly schemaPrefix?: string
}

type Row = Record<string, unknown>

/**
 * Assigns sharded keys (see {@link shardedIds}). A MikroORM extension: `register()` runs when the
 * ORM starts, checks every sharded key, and makes the instance the ORM's subscriber.
 */
export class ShardedIdSubscriber implements EventSubscriber, SyncAssigner {
  readonly source: IdSource
  readonly idType: IdType
  readonly placement: Placement
  readonly #schemas: readonly string[]
  /** The keys `onCreate` gave out, by entity: checked against the rule again at flush. */
  readonly #issued = new IssuedKeys()
  #registered = false

  /**
   * The routing this ORM is one server of (set by `shardedOrms()`): every row it inserts or
   * updates must live on `server`.
   * @internal
   */
  home: { readonly homes: ShardHomes<unknown>; readonly server: string } | undefined

  constructor(options: ShardedIdsOptions) {
    checkKnownOptions('shardedIds() options', options, [
      'source',
      'idType',
      'schema',
      'schemaPrefix',
    ])
    if (!options.source || typeof options.source.nextIds !== 'function') {
      throw new ConfigurationError('shardedIds() needs a source: shardedIds({ source }).')
    }
    this.source = options.source
    this.idType = options.idType ?? 'bigint'
    if (this.idType !== 'bigint' && this.idType !== 'string') {
      throw new ConfigurationError(
        `shardedIds idType must be 'bigint' or 'string', got ${JSON.stringify(this.idType)}: numbers lose precision above 2^53.`,
      )
    }
    this.placement = new Placement(options.source.sharding)
    const sharding = options.source.sharding
    const prefix = options.schemaPrefix ?? 'shard_'
    this.#schemas = [
      options.schema ?? 'shardflake',
      ...Array.from({ length: sharding?.logicalShards ?? 0 }, (_, shard) => `${prefix}${shard}`),
    ]
  }

  /**
   * Called by MikroORM for each entry of `extensions`: refuses a second `shardedIds()`, leaves
   * shardflake's schemas out of `orm.schema` and the migrator, and checks every sharded key once
   * the entities are discovered.
   * @throws ShardConflictError when the ORM already has a `shardedIds()`
   */
  register(orm: MikroORM): void {
    const subscribers = orm.config.get('subscribers') as EventSubscriber[]
    for (const other of subscribers) {
      if (other instanceof ShardedIdSubscriber && other !== this) {
        throw new ShardConflictError(
          'This MikroORM already has a shardedIds(): two would make keys for the same shards from two sources. Give MikroORM.init() one shardedIds({ source }).',
        )
      }
    }
    if (!subscribers.includes(this)) subscribers.push(this)
    this.#registered = true
    const generator = orm.config.get('schemaGenerator')
    generator.ignoreSchema = [...new Set([...(generator.ignoreSchema ?? []), ...this.#schemas])]
    // Rows of a sharded entity go into each INSERT in ID order (ascending, as AUTO_INCREMENT's).
    insertInIdOrderByDefault()
    // MikroORM 6 registers extensions after discovery, MikroORM 7 before it.
    const em = (orm as { em?: EntityManager }).em
    if (em) {
      this.checkMetadata(orm.getMetadata().getAll())
      em.getEventManager().registerSubscriber(this)
      return
    }
    const discovery = orm.config.get('discovery')
    const previous = discovery.afterDiscovered
    discovery.afterDiscovered = (storage, platform) => {
      const done = previous?.(storage, platform)
      if (done instanceof Promise) return done.then(() => this.checkMetadata(storage.getAll()))
      return this.checkMetadata(storage.getAll())
    }
  }

  /** Refuses registration as a plain subscriber, which would skip the startup checks. */
  getSubscribedEntities(): [] {
    if (!this.#registered) {
      throw new ConfigurationError(
        'shardedIds() is a MikroORM extension: list it in `extensions: [shardedIds({ source })]`, not in `subscribers`, so its keys are checked when the ORM starts.',
      )
    }
    return []
  }

  /**
   * Checks the sharded keys of discovered entities (see `checkShardedKeys`), and puts a check after
   * their own `beforeCreate` / `beforeUpdate` hooks, which run after `onFlush` has placed them.
   */
  private checkMetadata(all: Map<unknown, EntityMetadata> | Record<string, EntityMetadata>): void {
    const metas = all instanceof Map ? [...all.values()] : Object.values(all)
    checkShardedKeys(metas, this.idType, this.placement.sharding)
    for (const meta of metas) {
      if (!shardedKeyOf(meta)) continue
      for (const event of [EventType.beforeCreate, EventType.beforeUpdate] as const) {
        const hooks = meta.hooks[event]
        if (hooks?.length && !hooks.includes(afterOwnHooks)) hooks.push(afterOwnHooks)
      }
    }
  }

  /** `onCreate` of a sharded key: an ID now for a sync source whose shard key is known. */
  assignOnCreate(
    entity: object,
    em: EntityManager,
    spec: ShardedIdSpec,
  ): bigint | string | undefined {
    if (!isSyncSource(this.source)) return undefined
    const meta = this.metaOf(entity, em, spec)
    const key = shardedKeyOf(meta)
    let shard: number
    try {
      shard = this.placement.shardOf(entity, meta, key)
    } catch (error) {
      // Not known yet (set after em.create()): onFlush assigns it or throws.
      if (error instanceof MissingShardKeyError) return undefined
      throw error
    }
    // A shard column set to another shard: no ID now; the flush refuses it before any is made.
    const column = shardColumnOf(spec.rule)
    const given = column ? (entity as Row)[column] : undefined
    if (given !== undefined && given !== null && Number(given) !== shard) return undefined
    const id = inType(this.source.nextId(shard), idTypeOf(key!.prop))
    this.#issued.set(entity, id)
    return id
  }

  /** An entity's metadata; for plain data (`em.upsert(Entity, data)`), the entity the key is of. */
  private metaOf(entity: object, em: EntityManager, spec: ShardedIdSpec): EntityMetadata {
    if (Utils.isEntity(entity, true)) return helper(entity).__meta
    for (const meta of em.getMetadata()) {
      if (shardedKeyOf(meta)?.spec === spec) return meta
    }
    throw new ConfigurationError('A sharded key was created for an entity MikroORM does not know.')
  }

  /**
   * Places the flush's new entities by their rules as of now: entities without a key get one
   * (one `nextIds` per shard); an entity whose key `em.create()` gave but whose rule now says
   * another shard gets a new key if nothing references it, or the flush fails with
   * `ShardKeyChangedError` before anything is written. The new keys are written into the
   * change sets (public `ChangeSet` fields), so children's foreign keys carry them; a change set
   * this cannot patch is recomputed with `uow.recomputeSingleChangeSet`.
   */
  async onFlush({ em, uow }: FlushEventArgs): Promise<void> {
    // Also when the ORM's @mikro-orm/core is another copy than the one this package imports.
    insertInIdOrder(uow.getChangeSetPersister())
    const placed = await this.place(em, uow)
    this.fillShardColumns(uow)
    this.checkHomes(placed)
  }

  /**
   * Writes the shard of each new row's ID into its rule's `shardColumn` (entity and change set),
   * and refuses an update that sets it to another shard.
   * @throws MisplacedIdError, ShardKeyChangedError
   */
  private fillShardColumns(uow: FlushEventArgs['uow']): void {
    const sharding = this.placement.sharding
    if (!sharding) return
    for (const changeSet of uow.getChangeSets() as ChangeSet<Row>[]) {
      const key = shardedKeyOf(changeSet.meta)
      const column = key && shardColumnOf(key.spec.rule)
      if (!key || !column) continue
      const { entity, payload } = changeSet
      const id = entity[key.prop.name]
      if (id === null || id === undefined) continue
      if (changeSet.type === ChangeSetType.CREATE) {
        fillShardColumn(sharding, entity, column, id as bigint, changeSet.meta.className)
        payload[column] = entity[column]
      } else if (changeSet.type === ChangeSetType.UPDATE && column in payload) {
        checkShardColumnChange(
          sharding,
          id,
          column,
          payload[column],
          `${changeSet.meta.className} (shardColumn '${column}'), by flush`,
        )
      }
    }
  }

  /**
   * Refuses a flush that would insert or update a row whose shard lives on another server than
   * this ORM's (when routed by `shardedOrms()`), before anything is written. The shards `place`
   * read or gave are checked as they are; only the other rows' IDs are read.
   * @throws WrongServerError
   */
  private checkHomes({ plan, filled }: Placed): void {
    const home = this.home
    const sharding = this.placement.sharding
    if (!home || !sharding) return
    const checked: boolean[] = [] // by shard: a flush of thousands of rows has a few
    const check = (shard: number) => {
      if (checked[shard] === true) return
      home.homes.checkHome(home.server, shard)
      checked[shard] = true
    }
    plan.keptShards.forEach((_, shard) => {
      check(shard)
    })
    for (const shard of filled) check(shard)
    for (const changeSet of plan.unread) {
      const id = changeSet.entity[shardedKeyOf(changeSet.meta)!.prop.name]
      // A bigint, or the decimal string a driver returns: read as it is (refused as by toBigInt).
      if (id !== null && id !== undefined) check(sharding.shardOfId(id as IdInput))
    }
  }

  /**
   * Plans the flush (see `planFlush`) and gives its entities without a key, or whose early key is
   * on another shard than their rule's, a key. @returns the plan and the shards of the new keys.
   */
  private async place(em: EntityManager, uow: FlushEventArgs['uow']): Promise<Placed> {
    const plan = planFlush(uow, this.placement, this.#issued)
    const { pending, moved } = plan
    const placed = [...pending, ...moved]
    if (placed.length === 0) return { plan, filled: [] }
    rekey(uow, moved, 'out')
    const before = moved.map((changeSet) => changeSet.entity[changeSet.meta.primaryKeys[0]!])
    let filled: number[]
    try {
      filled = await this.fill(
        placed.map((changeSet) => changeSet.entity),
        placed.map((changeSet) => changeSet.meta),
      )
    } catch (error) {
      moved.forEach((changeSet, i) => {
        changeSet.entity[changeSet.meta.primaryKeys[0]!] = before[i]
      })
      throw error
    } finally {
      rekey(uow, moved, 'in')
    }
    const keys = databaseKeys(placed, em.getPlatform())
    for (const changeSet of uow.getChangeSets() as ChangeSet<Row>[]) {
      if (changeSet.type !== ChangeSetType.CREATE && changeSet.type !== ChangeSetType.UPDATE) {
        continue
      }
      if (!patchPayload(changeSet, keys)) uow.recomputeSingleChangeSet(changeSet.entity)
    }
    return { plan, filled }
  }

  /**
   * `em.upsert()`: an async source's ID for data without one (a sync source's came from
   * onCreate). Data with its own ID may update the row of that ID: the rule, applied to the
   * data, must give the ID's shard (`ShardKeyChangedError`). So must an entity's ID given at
   * `em.create()` whose key changed since: a flush gives such an entity a new ID, an upsert
   * cannot (`ShardKeyChangedError`, nothing written).
   */
  async beforeUpsert({ entity, meta }: EventArgs<object>): Promise<void> {
    const key = shardedKeyOf(meta)
    if (!key) return
    const id = (entity as Row)[key.prop.name]
    if (id === null || id === undefined) await this.fill([entity], [meta])
    else if (this.#issued.get(entity) !== id) {
      checkUpdate(entity, meta, this.placement, id, 'em.upsert()')
    } else this.checkIssuedKey(entity, meta, id)
    this.fillShardColumnOf(entity as Row, meta)
  }

  /**
   * An ID given at `em.create()` must still be on the shard its rule gives when the entity is
   * upserted. @throws ShardKeyChangedError
   */
  private checkIssuedKey(entity: object, meta: EntityMetadata, id: unknown): void {
    const sharding = this.placement.sharding
    const shard = sharding ? ruleShard(this.placement, entity, meta) : undefined
    if (!sharding || shard === undefined) return
    const idShard = sharding.layout.shardOf(toBigInt(id as never))
    if (idShard === shard) return
    throw new ShardKeyChangedError(
      `${meta.className} ${String(id)} got its ID on shard ${idShard} at em.create(), but its shard rule now gives shard ${shard} (its key changed since). Nothing was written: em.upsert() cannot give it another ID. Set the key before em.create(), or persist the entity with em.flush(), which gives it an ID on its new shard.`,
    )
  }

  /** Fills (or checks) the shard column of one row that has its ID. @throws MisplacedIdError */
  private fillShardColumnOf(row: Row, meta: EntityMetadata): void {
    const key = shardedKeyOf(meta)
    const column = key && shardColumnOf(key.spec.rule)
    const sharding = this.placement.sharding
    const id = key && row[key.prop.name]
    if (!column || !sharding || id === null || id === undefined) return
    fillShardColumn(sharding, row, column, id, meta.className)
  }

  /** Gives every row without a key one, and checks the keys rows have (see `assignShardedIds`). */
  async assignRows(rows: readonly Row[], meta: EntityMetadata): Promise<void> {
    const key = shardedKeyOf(meta)
    if (!key) {
      throw new ConfigurationError(`${meta.className} has no @ShardedId/shardedId() primary key.`)
    }
    const sharding = this.placement.sharding
    for (const row of rows) {
      const id = row[key.prop.name]
      if (id === null || id === undefined) continue
      const shard =
        sharding && !suppliedIdsTrusted() ? ruleShard(this.placement, row, meta) : undefined
      checkSuppliedId(sharding, id, shard, meta.className)
    }
    for (const row of rows) if (row[key.prop.name] != null) this.fillShardColumnOf(row, meta)
    const pending = rows.filter((row) => row[key.prop.name] == null)
    await this.fill(
      pending,
      pending.map(() => meta),
    )
    for (const row of pending) this.fillShardColumnOf(row, meta)
  }

  /** Gives each row a key on the shard its rule gives. @returns those shards, by row. */
  private async fill(rows: readonly object[], metas: readonly EntityMetadata[]): Promise<number[]> {
    const shards = rows.map((row, i) => this.placement.shardOf(row, metas[i]!))
    rows.forEach((row, i) => {
      // A shard column the caller set is checked before any ID is spent.
      const column = shardColumnOf(shardedKeyOf(metas[i]!)!.spec.rule)
      if (column) setShardColumn(row, column, shards[i]!, metas[i]!.className)
    })
    // Ascending in row order per table when the source can (in-process, leased): the INSERT then
    // appends to the primary key's B-tree instead of splitting its pages.
    const ids = await allocateAscending(this.source, shards, undefined, {
      groups: metas.map((meta) => meta.tableName),
    })
    rows.forEach((row, i) => {
      const { prop } = shardedKeyOf(metas[i]!)!
      ;(row as Row)[prop.name] = inType(ids[i]!, idTypeOf(prop))
    })
    return shards
  }
}

/** What `place` did in a flush: its plan, and the shards of the keys it gave (by placed entity). */
interface Placed {
  readonly plan: FlushPlan
  readonly filled: readonly number[]
}

/**
 * The MikroORM extension that gives every entity with a `@ShardedId()` / `shardedId()` key its
 * 64-bit sharded ID before the INSERT. List it in `extensions`; it registers its own subscriber.
 *
 * - When the ORM starts, every sharded key is checked: its rule (`InvalidShardRuleError`, e.g.
 *   `shardBy` on a relation to a sharded entity), a 64-bit column the database does not generate
 *   (`ConfigurationError`). A second `shardedIds()` is refused (`ShardConflictError`).
 * - **Sync source** (`InProcessSource`): the ID is set by `em.create()` (MikroORM 7 runs `onCreate`
 *   early) when the shard key is known. At flush the rule is applied again: a key whose shard no
 *   longer matches is replaced if nothing references the entity, else `ShardKeyChangedError`.
 * - **Async source** (`PostgresSource`, `MysqlSource`, ...): in `onFlush`, every new entity of
 *   the flush gets its ID, one `nextIds` round trip per shard.
 * - An entity whose shard key is missing (or an empty or blank string) at flush fails with
 *   `MissingShardKeyError` before anything is written.
 * - An ID the caller set is kept when it is on the shard its rule gives, else the flush fails
 *   with `MisplacedIdError`; an update (a flush, `em.upsert()`, or the entity's own
 *   `beforeCreate`/`beforeUpdate` hook) that gives a stored row a key or parent on another shard
 *   than its ID's fails with `ShardKeyChangedError`. Inside `trustSuppliedIds(() => em.flush())`
 *   both are kept as given (imports).
 * - `orm.schema` and the migrator leave shardflake's PostgreSQL schemas alone
 *   (`schemaGenerator.ignoreSchema`).
 * - `em.insert`, `em.insertMany` and query-builder inserts bypass every hook: use
 *   `assignShardedIds()` for them (the NOT NULL key fails loudly if you forget).
 * - Every INSERT of entities (a flush, `em.insert()` / `em.insertMany()` of instances) sends a
 *   sharded table's rows in ID order, so it appends to the primary key's B-tree as an
 *   autoincrement key does; the entities keep their IDs.
 *
 * @example
 * ```ts
 * import { defineSharding, InProcessSource, instagram } from '@shardflake/core'
 * import { shardedIds } from '@shardflake/mikro-orm'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
 * const orm = await MikroORM.init({
 *   entities: [User, Post],
 *   extensions: [shardedIds({ source: new InProcessSource({ sharding, shards: 'all' }) })],
 * })
 * ```
 */
export function shardedIds(options: ShardedIdsOptions): ShardedIdSubscriber {
  return new ShardedIdSubscriber(options)
}

/**
 * Runs after an entity's own `beforeCreate` / `beforeUpdate` hooks (MikroORM runs them after
 * `onFlush`, just before the write): a hook that changed the shard key or parent so that the rule
 * gives another shard than the ID's fails the flush before the row is written.
 * @throws ShardKeyChangedError
 */
function afterOwnHooks({ entity, meta, em }: EventArgs<object>): void {
  const subscriber = [...em.getEventManager().getSubscribers()].find(
    (candidate): candidate is ShardedIdSubscriber => candidate instanceof ShardedIdSubscriber,
  )
  const key = shardedKeyOf(meta)
  if (!subscriber || !key) return
  const id = (entity as Row)[key.prop.name]
  checkUpdate(entity, meta, subscriber.placement, id, 'a hook of the entity, after onFlush')
}

function inType(id: bigint, idType: IdType): bigint | string {
  return idType === 'string' ? id.toString() : id
}
