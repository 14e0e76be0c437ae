import {
  ConfigurationError,
  checkKnownOptions,
  type IdSource,
  InvalidArgumentError,
  ShardConflictError,
  type Sharding,
} from '@shardflake/core'
import type {
  DataSource,
  EntityManager,
  EntityMetadata,
  EntityTarget,
  ObjectLiteral,
} from 'typeorm'
import { checkEntities } from './checks'
import { type SaveRoots, saveRoots } from './placement'
import { registerSchemas } from './sharded-id'
import { ShardedIdSubscriber } from './subscriber'
import { checkUpsert } from './upsert'

/** What {@link shardedIds} takes. */
export interface ShardedIdsOptions {
  /**
   * Where IDs come from: `InProcessSource` (no round trip), `PostgresSource`, `MysqlSource`,
   * `RedisSource`, ... Shard keys are placed with its `sharding` (the application's
   * `defineSharding({ layout, logicalShards })`).
   */
  readonly source: IdSource
  /**
   * What entities carry: a decimal `string` (TypeORM's own BIGINT representation) or a `bigint`.
   * With `'bigint'`, loaded entities carry `bigint` in their sharded keys and in the foreign-key
   * columns that hold them. Never `number`: it loses precision above 2^53, twelve days after
   * the epoch.
   * @default 'string'
   */
  readonly idType?: 'string' | 'bigint'
}

const installed = new WeakMap<DataSource, ShardedIdSubscriber>()

/** The subscriber `shardedIds()` installed on a DataSource, if any. */
export function subscriberOf(dataSource: unknown): ShardedIdSubscriber | undefined {
  return typeof dataSource === 'object' && dataSource !== null
    ? installed.get(dataSource as DataSource)
    : undefined
}

/**
 * Gives the `@ShardedId` entities of a DataSource their IDs before every INSERT, and checks the
 * IDs it did not make: one you give a new row must be on the shard its rule gives
 * (`MisplacedIdError`), and a `save()` or `upsert()` may not set a stored row's shard key to one
 * on another shard than its ID's (`ShardKeyChangedError`); inside `trustSuppliedIds(() => ...)`
 * both are kept as given (imports). Call it once,
 * before `dataSource.initialize()`. It refuses at once driver settings that would turn IDs into
 * lossy numbers (`parseInt8` on PostgreSQL; `supportBigNumbers`/`bigNumberStrings` off on MySQL
 * and MariaDB). When the DataSource initializes, before it synchronizes or runs migrations, it
 * checks every sharded entity against its metadata (the key column is a `bigint` the database
 * does not generate; `shardBy` does not name a sharded parent; `sameShardAs` names a relation or
 * a column) and, on MySQL and MariaDB, that `sql_mode` is strict; `initialize()` then rejects
 * with the typed error and closes the connection.
 *
 * @returns the subscriber it adds to `dataSource.subscribers`.
 * @throws ConfigurationError for lossy driver settings or an unknown `idType`.
 * @throws InvalidArgumentError for an unknown option (a misspelt `idtype`), naming the closest.
 * @throws ShardConflictError when the DataSource already has shardflake installed.
 * @example
 * ```ts
 * const dataSource = new DataSource({ type: 'postgres', url, entities: [Post, Comment] })
 * shardedIds(dataSource, { source: new InProcessSource({ sharding, shards: 'all' }) })
 * await dataSource.initialize()
 * ```
 */
export function shardedIds(
  dataSource: DataSource,
  options: ShardedIdsOptions,
): ShardedIdSubscriber {
  checkKnownOptions('shardedIds() options', options, ['source', 'idType'])
  const { source } = options
  if (!source || typeof source.nextIds !== 'function') {
    throw new InvalidArgumentError(
      'shardedIds needs a source: { source: new InProcessSource(...) }.',
    )
  }
  const idType = options.idType ?? 'string'
  if (idType !== 'string' && idType !== 'bigint') {
    throw new ConfigurationError(
      `idType must be 'string' or 'bigint', got ${JSON.stringify(idType)}: numbers lose precision above 2^53.`,
    )
  }
  if (installed.has(dataSource)) {
    throw new ShardConflictError(
      'shardedIds() was already called for this DataSource. Two subscribers would each give the same rows IDs, from two sources: call it once, with the one source.',
    )
  }
  if (dataSource.isInitialized) {
    throw new ConfigurationError(
      'shardedIds() must be called before dataSource.initialize(): it checks the entities while TypeORM builds their metadata, before synchronize or migrations run.',
    )
  }
  checkLossless(dataSource)
  const subscriber = new ShardedIdSubscriber(source, idType)
  installed.set(dataSource, subscriber)

  // initialize() builds metadata (replacing the subscriber list), then synchronizes and runs
  // migrations; a failure in between makes it close the connection and rethrow.
  // `buildMetadatas` is protected in TypeORM's types, so it is reached at run time, and checked.
  const buildMetadatas: unknown = Reflect.get(dataSource, 'buildMetadatas')
  if (typeof buildMetadatas !== 'function') {
    throw new ConfigurationError(
      'This TypeORM version has no DataSource.buildMetadatas(), where shardedIds() checks the entities: use TypeORM 0.3.20+ or 1.x.',
    )
  }
  Reflect.set(dataSource, 'buildMetadatas', async () => {
    await buildMetadatas.call(dataSource)
    checkLossless(dataSource)
    registerSchemas(dataSource.options.entities)
    checkEntities(dataSource, source)
    await checkSqlMode(dataSource)
    if (!dataSource.subscribers.includes(subscriber)) dataSource.subscribers.push(subscriber)
  })

  // Every save() runs with its entities at hand, so a new child pushed onto a loaded parent's
  // relation finds that parent (TypeORM hands the hook the child alone); every upsert() is
  // checked before it may change a stored row's shard key.
  const sharding = source.sharding
  watchCalls(dataSource, sharding, dataSource.manager)
  const createEntityManager = dataSource.createEntityManager.bind(dataSource)
  dataSource.createEntityManager = (queryRunner) =>
    watchCalls(dataSource, sharding, createEntityManager(queryRunner))
  return subscriber
}

function watchCalls(
  dataSource: DataSource,
  sharding: Sharding | undefined,
  manager: EntityManager,
): EntityManager {
  const upsert = manager.upsert
  manager.upsert = async function (this: EntityManager, ...args: unknown[]) {
    await checkUpsert(this, sharding, args[0], args[1], args[2])
    return (upsert as (...a: unknown[]) => ReturnType<EntityManager['upsert']>).apply(this, args)
  } as EntityManager['upsert']
  return trackSaves(dataSource, manager)
}

function trackSaves(dataSource: DataSource, manager: EntityManager): EntityManager {
  const save = manager.save
  const metadataOf = (entity: object): EntityMetadata | undefined =>
    dataSource.hasMetadata(entity.constructor)
      ? dataSource.getMetadata(entity.constructor)
      : undefined
  manager.save = function (this: EntityManager, ...args: unknown[]) {
    const [first, second] = args
    const named =
      args.length > 1 &&
      (typeof first === 'function' || typeof first === 'string' || isEntitySchema(first))
    const roots: SaveRoots = {
      entity: named ? second : first,
      target:
        named && dataSource.hasMetadata(first as EntityTarget<ObjectLiteral>)
          ? dataSource.getMetadata(first as EntityTarget<ObjectLiteral>)
          : undefined,
      metadataOf,
    }
    return saveRoots.run(roots, () => (save as (...a: unknown[]) => unknown).apply(this, args))
  } as EntityManager['save']
  return manager
}

function isEntitySchema(value: unknown): boolean {
  return (
    typeof value === 'object' &&
    value !== null &&
    (value as { '@instanceof'?: symbol })['@instanceof'] === Symbol.for('EntitySchema')
  )
}

/**
 * Throws a `ConfigurationError` when the `DataSource` would read BIGINT as a JavaScript
 * `number`.
 */
function checkLossless(dataSource: DataSource): void {
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
  if (isMysql(dataSource)) {
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

/**
 * Refuses a MySQL/MariaDB session that is not in strict mode: there, an INSERT that bypasses the
 * subscriber (raw SQL, `listeners: false`) writes a missing key as 0 instead of failing.
 */
async function checkSqlMode(dataSource: DataSource): Promise<void> {
  if (!isMysql(dataSource)) return
  const rows: unknown = await dataSource.query('SELECT @@SESSION.sql_mode AS mode')
  const mode = String((rows as { mode?: unknown }[])[0]?.mode ?? '')
  if (!/\bSTRICT_(TRANS|ALL)_TABLES\b/.test(mode)) {
    throw new ConfigurationError(
      `sql_mode ${JSON.stringify(mode)} is not strict: an INSERT that bypasses the subscriber (raw SQL, listeners: false) would store a missing sharded key as 0 instead of failing. Add STRICT_TRANS_TABLES to sql_mode (the default of MariaDB 10.2.4+ and MySQL 5.7+).`,
    )
  }
}

function isMysql(dataSource: DataSource): boolean {
  const type: string = dataSource.options.type
  return type === 'mysql' || type === 'mariadb' || type === 'aurora-mysql'
}

interface PgModule {
  defaults?: { parseInt8?: boolean }
  types?: { getTypeParser?: (oid: number, format?: string) => (text: string) => unknown }
}
