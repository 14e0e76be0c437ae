import {
  allocateAscending,
  checkKeyChange,
  checkShardColumnChange,
  fillShardColumn,
  type IdRequestContext,
  type IdSource,
  type ShardHomes,
  setShardColumn,
  shardColumnOf,
  suppliedIdsTrusted,
  toBigInt,
  toSigned64,
} from '@shardflake/core'
import type {
  DataSource,
  EntityMetadata,
  EntitySubscriberInterface,
  InsertEvent,
  LoadEvent,
  ObjectLiteral,
  QueryRunner,
  UpdateEvent,
} from 'typeorm'
import { describeRow, type Pending, Placement, readsRule, saveRoots } from './placement'
import { findShardedId, registerSchemas, type ShardedIdEntry } from './sharded-id'

/** The hooks of one call: every hook of it returns `done`, one promise for the whole call. */
interface Batch {
  readonly items: Pending[]
  readonly done: Promise<void>
}

/**
 * Assigns shardflake IDs in `beforeInsert`, for every insert TypeORM broadcasts: `save()` of one
 * entity or an array, cascaded children, `insert()` with instances or plain objects, query-builder
 * inserts and `upsert()`. The hooks of one call are coalesced (per query runner, so concurrent
 * calls stay apart) into one allocation: a synchronous source (in-process, leased) hands out the
 * IDs ascending in row order per table when its time window allows (`allocateAscending`), so a
 * bulk INSERT fills the primary key's pages as AUTO_INCREMENT does; otherwise one `nextIds` per
 * shard. A synchronous source costs no round trip. An
 * ID the caller set is kept when it is on the shard its rule gives (`MisplacedIdError` otherwise,
 * outside `trustSuppliedIds`). `beforeUpdate` refuses a `save()` that changes a stored row's shard
 * key or parent so that its rule gives another shard than its ID's (`ShardKeyChangedError`).
 * Database sources get the call's query runner as `context.query`.
 *
 * Made by `shardedIds(dataSource, options)`, which adds it to `dataSource.subscribers` once the
 * DataSource has built its metadata. Do not list it in the DataSource's `subscribers` option:
 * TypeORM builds that list from classes and silently drops instances.
 */
export class ShardedIdSubscriber implements EntitySubscriberInterface<ObjectLiteral> {
  private readonly batches = new Map<object, Batch>()
  private readonly scanned = new WeakSet<object>()
  private readonly known = new WeakMap<EntityMetadata, ShardedIdEntry | null>()

  /**
   * The routing this DataSource is one server of (set by `shardedDataSources()`): every row it
   * inserts must live on `server`.
   * @internal
   */
  home: { readonly homes: ShardHomes<unknown>; readonly server: string } | undefined

  /** @internal Built by `shardedIds()`. */
  constructor(
    readonly source: IdSource,
    readonly idType: 'string' | 'bigint',
  ) {}

  beforeInsert(event: InsertEvent<ObjectLiteral>): Promise<void> | undefined {
    const entity = event.entity
    if (!entity || typeof entity !== 'object') return undefined
    const sharded = this.shardedIdOf(event.metadata, event.connection)
    if (!sharded) return undefined
    const current: unknown = entity[sharded.propertyName]
    const supplied = current !== undefined && current !== null
    if (supplied) {
      toBigInt(current, `${event.metadata.name}.${sharded.propertyName}`)
      // Checked against its rule with the rest of the call (its parent may be new in it).
      if (!this.source.sharding || suppliedIdsTrusted()) {
        if (this.home && this.source.sharding) {
          this.checkHome(this.source.sharding.shardOfId(toBigInt(current)))
        }
        this.fillShardColumn(entity, event.metadata, sharded)
        return undefined
      }
    }
    const batch = this.batchOf(event.queryRunner)
    batch.items.push({
      entity,
      metadata: event.metadata,
      sharded,
      roots: saveRoots.getStore(),
      supplied,
    })
    return batch.done
  }

  /**
   * Refuses a `save()` that sets a stored row's shard key (or parent) so that its rule gives
   * another shard than its ID's: an ID never changes shard. Only where TypeORM hands over the
   * stored row (`save()`); `update()` and query-builder updates name rows by a filter.
   */
  beforeUpdate(event: UpdateEvent<ObjectLiteral>): Promise<void> | undefined {
    const { entity, databaseEntity, metadata } = event
    const sharding = this.source.sharding
    if (!entity || !sharding) return undefined
    const sharded = this.shardedIdOf(metadata, event.connection)
    if (this.home && sharded) {
      const stored: unknown = entity[sharded.propertyName] ?? databaseEntity?.[sharded.propertyName]
      if (stored !== undefined && stored !== null)
        this.checkHome(sharding.shardOfId(toBigInt(stored)))
    }
    const shardColumn = sharded && shardColumnOf(sharded.rule)
    if (
      sharded &&
      shardColumn &&
      event.updatedColumns.some((c) => c.propertyName === shardColumn)
    ) {
      const id: unknown = entity[sharded.propertyName] ?? databaseEntity?.[sharded.propertyName]
      if (id !== undefined && id !== null) {
        checkShardColumnChange(
          sharding,
          id,
          shardColumn,
          entity[shardColumn],
          `${metadata.name} (shardColumn '${shardColumn}'), saved`,
        )
      }
    }
    if (!databaseEntity || suppliedIdsTrusted()) return undefined
    if (!sharded || !readsRule(sharded, metadata, event.updatedColumns, event.updatedRelations)) {
      return undefined
    }
    const item: Pending = { entity, metadata, sharded, roots: saveRoots.getStore(), supplied: true }
    const check = (batch: readonly Pending[]) => {
      const id: unknown = entity[sharded.propertyName] ?? databaseEntity[sharded.propertyName]
      const shard = new Placement(sharding, [...batch, item]).ruleShard(item)
      checkKeyChange(sharding, id, shard, `${describeRow(item)}, saved`)
    }
    // A new parent of the same call gets its ID in the call's batch: check after it.
    const pending = event.queryRunner && this.batches.get(event.queryRunner)
    if (!pending) {
      check([])
      return undefined
    }
    return handled(pending.done.then(() => check(pending.items)))
  }

  /**
   * Fills the rule's shard column of a new row that has its ID, or checks the value it carries.
   * @throws MisplacedIdError when the row carries another shard than its ID's.
   */
  private fillShardColumn(
    entity: ObjectLiteral,
    metadata: EntityMetadata,
    sharded: ShardedIdEntry,
  ): void {
    const column = shardColumnOf(sharded.rule)
    const sharding = this.source.sharding
    if (!column || !sharding) return
    fillShardColumn(sharding, entity, column, entity[sharded.propertyName], metadata.name)
  }

  /** @throws WrongServerError when this DataSource's server is not the shard's home. */
  private checkHome(shard: number): void {
    const home = this.home
    if (home) home.homes.checkHome(home.server, shard)
  }

  /** The batch of the call running on `queryRunner`, started when its first hook runs. */
  private batchOf(queryRunner: QueryRunner | undefined): Batch {
    const key: object = queryRunner ?? this
    let batch = this.batches.get(key)
    if (!batch) {
      const items: Pending[] = []
      // Every hook of one save()/insert() is broadcast in one synchronous loop: by the time this
      // microtask runs, the whole call is in the batch. One promise serves all its hooks (a
      // promise per row cost a third of the hook's time on 1000-row saves).
      const done = Promise.resolve().then(() => {
        this.batches.delete(key)
        return this.flush(items, queryRunner)
      })
      batch = { items, done: handled(done) }
      this.batches.set(key, batch)
    }
    return batch
  }

  /**
   * With `idType: 'bigint'`, turns the sharded keys of loaded entities, and the foreign-key
   * columns that hold them, into `bigint`. Done here rather than with a column transformer:
   * TypeORM hashes loaded key values with `JSON.stringify` while it builds relations, which
   * cannot serialize a `bigint`.
   */
  afterLoad(entity: ObjectLiteral, event?: LoadEvent<ObjectLiteral>): void {
    if (this.idType !== 'bigint' || !event?.metadata) return
    for (const property of this.bigintProperties(event.metadata)) {
      const value: unknown = entity[property]
      if (typeof value === 'string' || typeof value === 'number') {
        entity[property] = toBigInt(value, `${event.metadata.name}.${property}`)
      }
    }
  }

  /**
   * Explains a NOT NULL failure on a sharded key: the insert bypassed `beforeInsert`
   * (`listeners: false`, `callListeners(false)`, raw SQL). TypeORM builds its `QueryFailedError`
   * from the driver error after this hook, so the hint lands in the message users see.
   */
  afterQuery(event: AfterQueryEvent): void {
    const error = event.error as DriverError | undefined
    if (event.success || !error || typeof error.message !== 'string' || error.shardflake) return
    if (!/^\s*INSERT\b/i.test(event.query)) return
    const column =
      error.code === '23502'
        ? error.column
        : error.errno === 1364 || error.errno === 1048
          ? /'([^']+)'/.exec(error.message)?.[1]
          : undefined
    if (!column) return
    const dataSource = event.connection ?? event.dataSource
    const target = dataSource?.entityMetadatas.find((metadata) => {
      const sharded = findShardedId(metadata.target)
      const key = sharded && metadata.findColumnWithPropertyName(sharded.propertyName)
      return (
        key?.databaseName === column &&
        (error.table
          ? error.table === metadata.tableName
          : event.query.includes(metadata.tableName))
      )
    })
    if (!target) return
    error.shardflake = true
    error.message += ` [shardflake: ${target.tableName}.${column} is a sharded key, assigned by the @ShardedId subscriber in beforeInsert, and this INSERT did not go through it (save()/insert() with listeners: false, a query builder with callListeners(false), or raw SQL). Keep listeners on, or set the ID yourself from the source (source.nextId(shard)).]`
  }

  /** The sharded key of an entity, looked up once per metadata. */
  private shardedIdOf(
    metadata: EntityMetadata,
    dataSource: DataSource | undefined,
  ): ShardedIdEntry | undefined {
    const cached = this.known.get(metadata)
    if (cached !== undefined) return cached ?? undefined
    let found = findShardedId(metadata.target)
    if (!found && dataSource && !this.scanned.has(dataSource)) {
      this.scanned.add(dataSource)
      registerSchemas(dataSource.options.entities)
      found = findShardedId(metadata.target)
    }
    this.known.set(metadata, found ?? null)
    return found
  }

  private readonly bigintColumns = new WeakMap<EntityMetadata, readonly string[]>()

  /** The sharded key and the columns referencing a sharded key, by property name. */
  private bigintProperties(metadata: EntityMetadata): readonly string[] {
    let properties = this.bigintColumns.get(metadata)
    if (!properties) {
      const list = new Set<string>()
      const own = this.shardedIdOf(metadata, metadata.connection)
      if (own) list.add(own.propertyName)
      for (const relation of metadata.relations) {
        const parent = this.shardedIdOf(relation.inverseEntityMetadata, metadata.connection)
        if (!parent) continue
        for (const joinColumn of relation.joinColumns) {
          for (const column of metadata.columns) {
            if (
              column.databaseName === joinColumn.databaseName &&
              column.propertyName !== relation.propertyName
            ) {
              list.add(column.propertyName)
            }
          }
        }
      }
      properties = [...list]
      this.bigintColumns.set(metadata, properties)
    }
    return properties
  }

  private async flush(batch: Pending[], queryRunner: QueryRunner | undefined): Promise<void> {
    const placement = new Placement(this.source.sharding, batch)
    placement.checkSuppliedIds()
    // Every row of the call is placed before any is written: one on another server fails it all.
    if (this.home) {
      const checked: boolean[] = [] // by shard
      for (const item of batch) {
        const shard = placement.shardOf(item)
        if (checked[shard] === true) continue
        this.checkHome(shard)
        checked[shard] = true
      }
    }
    // A shard column the caller set on a row with its own ID is checked before any ID is spent.
    for (const item of batch) {
      if (item.supplied) this.fillShardColumn(item.entity, item.metadata, item.sharded)
    }
    const pending = batch.filter((item) => !item.supplied)
    if (pending.length === 0) return
    const shards = pending.map((item) => placement.shardOf(item))
    const sharding = this.source.sharding
    pending.forEach((item, i) => {
      // Checked before the IDs are allocated: the ID to come is on the rule's shard.
      const column = sharding && shardColumnOf(item.sharded.rule)
      if (column) setShardColumn(item.entity, column, shards[i]!, describeRow(item))
    })
    // Ascending in row order per table when the source can (in-process, leased): the multi-row
    // INSERT then appends to the primary key's B-tree instead of splitting its pages.
    const ids = await allocateAscending(this.source, shards, contextOf(queryRunner), {
      groups: pending.map((item) => item.metadata),
    })
    pending.forEach((item, i) => {
      // BIGINT columns are signed: IDs past 2^63 (layouts with a 64th bit in use) wrap to negative.
      const signed = toSigned64(ids[i]!)
      item.entity[item.sharded.propertyName] = this.idType === 'bigint' ? signed : signed.toString()
      this.fillShardColumn(item.entity, item.metadata, item.sharded)
    })
  }
}

/**
 * `promise`, marked as handled: TypeORM stops broadcasting a call's hooks at the first one that
 * throws (a `@BeforeInsert` validation, a bad ID in row 2) and never awaits the promises the
 * earlier hooks returned; the call itself rejects with that error. A rejection of the batch
 * nobody awaits any more must not end the process as an unhandled rejection.
 */
function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => undefined)
  return promise
}

type AfterQueryEvent = Parameters<NonNullable<EntitySubscriberInterface['afterQuery']>>[0]

interface DriverError {
  message: string
  code?: string
  errno?: number
  column?: string
  table?: string
  shardflake?: boolean
}

/**
 * The call's query runner as a source context. One connection runs one query at a time, and a
 * call spanning several shards asks for them concurrently: queries go one after another.
 */
function contextOf(queryRunner: QueryRunner | undefined): IdRequestContext | undefined {
  if (!queryRunner || queryRunner.isReleased) return undefined
  let previous: Promise<unknown> = Promise.resolve()
  return {
    query: (sql, params) => {
      const next = previous.then(async () => {
        const result: unknown = await queryRunner.query(sql, [...params])
        // A CALL comes back as [rows, status] from mysql2.
        const rows = Array.isArray(result) && Array.isArray(result[0]) ? result[0] : result
        return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
      })
      previous = next.catch(() => undefined)
      return next
    },
  }
}
