import {
  allocateIds,
  ConfigurationError,
  type IdRequestContext,
  type IdSource,
  type Layout,
  logicalShardsOf,
  MissingShardKeyError,
  resolveShard,
  toBigInt,
  toSigned64,
} from '@shardflake/core'
import type {
  DataSource,
  EntityMetadata,
  EntitySubscriberInterface,
  InsertEvent,
  ObjectLiteral,
  QueryRunner,
} from 'typeorm'
import { findShardedId, registerSchemas, type ShardedIdEntry } from './sharded-id'

/** What {@link useShardedIds} and {@link ShardedIdSubscriber} take. */
export interface ShardedIdsOptions {
  /**
   * Where IDs come from: `InProcessSource` (no round trip), `PostgresSource`, `MysqlSource`, ...
   * Integer shard keys are reduced modulo its `logicalShards`.
   */
  readonly source: IdSource
  /**
   * What the subscriber writes into the entity: a decimal `string` (TypeORM's own BIGINT
   * representation, safe as a foreign key and in relations) or a `bigint`. With `'bigint'` the
   * sharded columns also get a transformer so loaded entities carry `bigint`; foreign-key
   * columns you declare yourself stay strings unless you add {@link bigintTransformer}.
   * Never `number`: it loses precision above 2^53, twelve days after the epoch.
   * @default 'string'
   */
  readonly idType?: 'string' | 'bigint'
}

interface Pending {
  readonly entity: ObjectLiteral
  readonly metadata: EntityMetadata
  readonly sharded: ShardedIdEntry
  shard?: number
  resolving?: boolean
}

/** The hooks of one call: every hook of it returns `done`, one promise for the whole call. */
interface Batch {
  readonly items: Pending[]
  readonly done: Promise<void>
}

/**
 * Assigns shardflake IDs in `beforeInsert`, for every insert TypeORM broadcasts: `save()` of one
 * entity or an array, cascaded children, `insert()` with instances or plain objects, query-builder
 * inserts and `upsert()`. The hooks of one call are coalesced (per query runner, so concurrent
 * calls stay apart) into one `nextIds` per shard; a synchronous source costs no round trip. An
 * ID the caller set is kept. Database sources get the call's query runner as `context.query`.
 *
 * Prefer {@link useShardedIds}; build one yourself to list it in `subscribers` of a
 * `DataSource` you configure elsewhere.
 */
export class ShardedIdSubscriber implements EntitySubscriberInterface<ObjectLiteral> {
  readonly source: IdSource
  readonly idType: 'string' | 'bigint'
  private readonly layout: Layout | undefined
  private readonly logicalShards: number
  private readonly batches = new Map<object, Batch>()
  private readonly scanned = new WeakSet<object>()
  private readonly known = new WeakMap<EntityMetadata, ShardedIdEntry | null>()

  constructor(options: ShardedIdsOptions) {
    this.source = options.source
    this.idType = options.idType ?? 'string'
    if (this.idType !== 'string' && this.idType !== 'bigint') {
      throw new ConfigurationError(
        `idType must be 'string' or 'bigint', got ${JSON.stringify(this.idType)}: numbers lose precision above 2^53.`,
      )
    }
    this.layout = options.source.layout
    this.logicalShards = logicalShardsOf(options.source)
  }

  beforeInsert(event: InsertEvent<ObjectLiteral>): Promise<void> | undefined {
    const entity = event.entity
    if (!entity || typeof entity !== 'object') return undefined
    const sharded = this.shardedIdOf(event.metadata, event.connection)
    if (!sharded) return undefined
    const current: unknown = entity[sharded.propertyName]
    if (current !== undefined && current !== null) {
      toBigInt(current, `${event.metadata.name}.${sharded.propertyName}`)
      return undefined
    }
    const key: object = event.queryRunner ?? this
    let batch = this.batches.get(key)
    if (!batch) {
      const items: Pending[] = []
      const queryRunner = event.queryRunner
      // Every hook of one save()/insert() is broadcast in one synchronous loop: by the time this
      // microtask runs, the whole call is in the batch. One promise serves all its hooks (a
      // promise per row cost a third of the hook's time on 1000-row saves).
      const done = Promise.resolve().then(() => {
        this.batches.delete(key)
        return this.flush(items, queryRunner)
      })
      batch = { items, done }
      this.batches.set(key, batch)
    }
    batch.items.push({ entity, metadata: event.metadata, sharded })
    return batch.done
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

  private async flush(batch: Pending[], queryRunner: QueryRunner | undefined): Promise<void> {
    const byEntity = new Map(batch.map((item) => [item.entity, item]))
    const shards = batch.map((item) => this.shardOf(item, byEntity, batch))
    const ids = await allocateIds(this.source, shards, contextOf(queryRunner))
    batch.forEach((item, i) => {
      item.entity[item.sharded.propertyName] = this.present(ids[i]!)
    })
  }

  private present(id: bigint): string | bigint {
    // BIGINT columns are signed: IDs past 2^63 (layouts with a 64th bit in use) wrap to negative.
    const signed = toSigned64(id)
    return this.idType === 'bigint' ? signed : signed.toString()
  }

  private shardOf(item: Pending, byEntity: Map<ObjectLiteral, Pending>, batch: Pending[]): number {
    if (item.shard !== undefined) return item.shard
    const layout = this.layout
    if (!layout) return 0 // IDs without a shard field (ticket servers)
    const { rule } = item.sharded
    const options = { layout, logicalShards: this.logicalShards, entityName: item.metadata.name }
    if (item.resolving) {
      throw new MissingShardKeyError(
        `The sameShardAs rule of ${item.metadata.name} points back at itself through its parents.`,
      )
    }
    item.resolving = true
    let shard: number
    if ('sameShardAs' in rule) {
      const ref = rule.sameShardAs
      let parent: unknown =
        typeof ref === 'function' ? ref(item.entity) : item.entity[ref as string]
      if ((parent === undefined || parent === null) && typeof ref === 'string') {
        parent = findParentInBatch(item, ref, batch)
      }
      if (parent !== null && typeof parent === 'object') {
        const parentItem = byEntity.get(parent)
        if (parentItem) {
          shard = resolveShard({ shard: this.shardOf(parentItem, byEntity, batch) }, {}, options)
        } else {
          const id = primaryKeyOf(parent, item, ref)
          shard = resolveShard({ sameShardAs: () => id }, item.entity, options)
        }
      } else if (parent === undefined || parent === null) {
        throw new MissingShardKeyError(
          `The parent of ${item.metadata.name} (sameShardAs ${typeof ref === 'function' ? 'function' : `'${ref}'`}) is missing: the row's shard comes from it. Set it before saving.`,
        )
      } else {
        const id = toBigInt(parent, `Parent ID of ${item.metadata.name}`)
        shard = resolveShard({ sameShardAs: () => id }, item.entity, options)
      }
    } else {
      shard = resolveShard(rule, item.entity, options)
    }
    item.shard = shard
    item.resolving = false
    return shard
  }

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
}

/**
 * Installs a {@link ShardedIdSubscriber} on a `DataSource` (now if it is initialized, otherwise
 * right after `initialize()`), after refusing driver settings that would turn IDs into lossy
 * numbers (`parseInt8` on PostgreSQL; `supportBigNumbers`/`bigNumberStrings` off on MySQL and
 * MariaDB) with a `ConfigurationError`.
 *
 * @example
 * ```ts
 * import { InProcessSource, instagram } from '@shardflake/core'
 * import { useShardedIds } from '@shardflake/typeorm'
 *
 * const dataSource = new DataSource({ type: 'postgres', url, entities: [Post, Comment] })
 * useShardedIds(dataSource, { source: new InProcessSource({ layout: instagram, shards: 'all' }) })
 * await dataSource.initialize()
 * const post = await dataSource.getRepository(Post).save({ userId: '31341', title: 'hello' })
 * post.id // '1387263000905712345', assigned before the INSERT
 * ```
 */
export function useShardedIds(
  dataSource: DataSource,
  options: ShardedIdsOptions,
): ShardedIdSubscriber {
  checkLossless(dataSource)
  const subscriber = new ShardedIdSubscriber(options)
  const install = () => {
    checkLossless(dataSource)
    registerSchemas(dataSource.options.entities)
    if (subscriber.idType === 'bigint') installBigintTransformers(dataSource)
    if (!dataSource.subscribers.includes(subscriber)) dataSource.subscribers.push(subscriber)
  }
  if (dataSource.isInitialized) {
    install()
  } else {
    // initialize() replaces the subscriber list, so join it afterwards.
    const initialize = dataSource.initialize.bind(dataSource)
    dataSource.initialize = async () => {
      await initialize()
      install()
      return dataSource
    }
  }
  return subscriber
}

/**
 * A column transformer between BIGINT and `bigint`, for foreign-key columns next to sharded
 * keys when `idType: 'bigint'` is used.
 *
 * @example
 * ```ts
 * @Column({ type: 'bigint', transformer: bigintTransformer }) userId!: bigint
 * ```
 */
export const bigintTransformer = {
  to: (value: unknown): unknown => value,
  from: (value: unknown): unknown =>
    value === null || value === undefined ? value : toBigInt(value, 'BIGINT value'),
}

/**
 * Throws a `ConfigurationError` when the `DataSource` would read BIGINT as a JavaScript
 * `number`. Called by {@link useShardedIds}.
 */
export function checkLossless(dataSource: DataSource): void {
  const options = dataSource.options as {
    type: string
    parseInt8?: boolean
    supportBigNumbers?: boolean
    bigNumberStrings?: boolean
    extra?: { supportBigNumbers?: boolean; bigNumberStrings?: boolean }
  }
  if (options.type === 'postgres' || options.type === 'cockroachdb') {
    const pg = (dataSource.driver as { postgres?: PgModule }).postgres
    if (options.parseInt8 === true || pg?.defaults?.parseInt8 === true) {
      throw new ConfigurationError(
        'parseInt8 is on: BIGINT columns would come back as JavaScript numbers, which lose precision above 2^53 (every shardflake ID after its first twelve days). Remove parseInt8 from the DataSource options (and pg.defaults.parseInt8); TypeORM then hands BIGINT out as strings.',
      )
    }
    const parse = pg?.types?.getTypeParser?.(20, 'text')
    if (parse && typeof parse('9007199254740993') === 'number') {
      throw new ConfigurationError(
        'A pg type parser turns BIGINT (OID 20) into a JavaScript number, which loses precision above 2^53. Remove the types.setTypeParser(20, ...) override, or parse to BigInt instead.',
      )
    }
  }
  if (options.type === 'mysql' || options.type === 'mariadb' || options.type === 'aurora-mysql') {
    const lossy = [options, options.extra ?? {}].some(
      (set) => set.supportBigNumbers === false || set.bigNumberStrings === false,
    )
    if (lossy) {
      throw new ConfigurationError(
        'supportBigNumbers/bigNumberStrings is off: mysql2 would return BIGINT as JavaScript numbers (or a mix of numbers and strings), which lose precision above 2^53. Leave both at TypeORM\u2019s default (true).',
      )
    }
  }
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

interface PgModule {
  defaults?: { parseInt8?: boolean }
  types?: { getTypeParser?: (oid: number, format?: string) => (text: string) => unknown }
}

function installBigintTransformers(dataSource: DataSource): void {
  for (const metadata of dataSource.entityMetadatas) {
    const sharded = findShardedId(metadata.target)
    const column = sharded && metadata.findColumnWithPropertyName(sharded.propertyName)
    if (column && !column.transformer) column.transformer = bigintTransformer
  }
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

/**
 * The parent of `item` when its `sameShardAs` property is empty: the object its relation points
 * at (the property itself, or the relation sharing the property's column), or a parent in the
 * same call that lists `item` in its one-to-many relation (a cascade).
 */
function findParentInBatch(
  item: Pending,
  ref: string,
  batch: Pending[],
): ObjectLiteral | undefined {
  const column = item.metadata.findColumnWithPropertyName(ref)
  const relation =
    item.metadata.findRelationWithPropertyPath(ref) ??
    item.metadata.relations.find((candidate) =>
      candidate.joinColumns.some((joinColumn) => joinColumn.databaseName === column?.databaseName),
    )
  if (!relation) return undefined
  const target: unknown = relation.getEntityValue(item.entity)
  if (target !== null && typeof target === 'object') return target
  const inverse = relation.inverseRelation
  if (!inverse) return undefined
  for (const candidate of batch) {
    if (candidate === item || !isOf(candidate.metadata, relation.inverseEntityMetadata)) continue
    const children: unknown = inverse.getEntityValue(candidate.entity)
    if (children === item.entity || (Array.isArray(children) && children.includes(item.entity))) {
      return candidate.entity
    }
  }
  return undefined
}

function isOf(metadata: EntityMetadata, expected: EntityMetadata): boolean {
  return metadata === expected || metadata.inheritanceTree.includes(expected.target as never)
}

function primaryKeyOf(parent: object, item: Pending, ref: unknown): string | bigint {
  const relation =
    typeof ref === 'string'
      ? (item.metadata.findRelationWithPropertyPath(ref) ??
        item.metadata.relations.find(
          (candidate) => candidate.getEntityValue(item.entity) === parent,
        ))
      : undefined
  const sharded = findShardedId(parent.constructor)
  const value: unknown = relation
    ? relation.inverseEntityMetadata.primaryColumns[0]?.getEntityValue(parent)
    : sharded
      ? (parent as ObjectLiteral)[sharded.propertyName]
      : (parent as ObjectLiteral).id
  if (value === undefined || value === null) {
    throw new MissingShardKeyError(
      `The parent of ${item.metadata.name} (sameShardAs ${typeof ref === 'string' ? `'${ref}'` : 'function'}) has no ID yet and is not saved in the same call: save it first.`,
    )
  }
  return toBigInt(value, `Parent ID of ${item.metadata.name}`)
}
