import {
  type IdSource,
  InProcessSource,
  LeasedSource,
  type LeaseRegistry,
  type Sharding,
  type ShardMap,
  type ShardRange,
} from '@shardflake/core'
import pg from 'pg'
import type { Dialect } from '../databases'
import type { HomeServers } from '../homes/home-servers'
import { startRedis } from '../servers/redis'
import { testLeasedSharding } from '../shardings'
import { asAsync, withClose } from '../source-wrappers'

/** What a {@link RoutedSourceCase} gets to make its source: the suite's servers and homes. */
export interface RoutedSourceContext {
  readonly dialect: Dialect
  /** The case's sharding (its own, or the suite's). */
  readonly sharding: Sharding
  /** The homes of the logical shards: server names a, b and c. */
  readonly map: ShardMap<string>
  /** The suite's servers, holding the blog tables. */
  readonly servers: HomeServers
}

/** A logical shard whose counter a database source moved, and the server it moved on. */
export interface ShardDrawn {
  readonly server: string
  readonly shard: number
}

/**
 * One ID source the routed suite runs an adapter with, on the suite's servers.
 *
 * @example
 * ```ts
 * const inProcess: RoutedSourceCase = {
 *   name: 'in-process',
 *   create: ({ sharding }) => new InProcessSource({ sharding, shards: 'all' }),
 * }
 * ```
 */
export interface RoutedSourceCase {
  readonly name: string
  /** The sharding of the source's IDs. @default the suite's (Instagram layout, 64 shards) */
  readonly sharding?: Sharding
  /** Makes the source; its `close()` ends what it opened. */
  create(context: RoutedSourceContext): IdSource | Promise<IdSource>
  /**
   * For a source drawing IDs in the database: the shards whose counters moved, on each server,
   * read through raw SQL. The suite checks each was drawn on its shard's home.
   */
  drawn?(servers: HomeServers): Promise<ShardDrawn[]>
}

/** The parts of `@shardflake/postgres` the routed sources use. */
export interface PostgresPackage {
  installPostgres(
    client: pg.Pool,
    options: { sharding: Sharding; shards: { from: number; to: number } },
  ): Promise<unknown>
  PostgresSource: new (options: {
    sharding: Sharding
    databases: readonly ShardRange<string>[]
  }) => IdSource
  PostgresLeaseRegistry: new (pool: pg.Pool) => LeaseRegistry
}

/** A pool of `@shardflake/mysql`'s `createMysqlPool`, as far as the routed sources use it. */
export interface MysqlPoolLike {
  end(): Promise<void>
}

/** The parts of `@shardflake/mysql` the routed sources use. */
export interface MysqlPackage<Pool extends MysqlPoolLike> {
  createMysqlPool(config: { uri: string; connectionLimit: number }): Promise<Pool>
  installMysql(
    pool: Pool,
    options: { sharding: Sharding; shards: { from: number; to: number } },
  ): Promise<unknown>
  MysqlSource: new (options: {
    sharding: Sharding
    databases: readonly ShardRange<string>[]
  }) => IdSource
  MysqlLeaseRegistry: new (pool: Pool, options: { database: string }) => LeaseRegistry
}

/** The parts of `@shardflake/redis` the routed sources use. */
export interface RedisPackage {
  RedisSource: new (options: { sharding: Sharding; servers: string }) => IdSource
}

/**
 * The source packages, handed in by the adapter's tests (this kit cannot depend on them: they
 * test themselves with it): `import * as postgres from '@shardflake/postgres'`, and so on.
 */
export interface SourcePackages<Pool extends MysqlPoolLike> {
  readonly postgres: PostgresPackage
  readonly mysql: MysqlPackage<Pool>
  readonly redis: RedisPackage
}

/**
 * Every source the routed suite runs an adapter with on `dialect`, each where a user would put
 * it: the in-process generator (synchronous, and behind promises), `LeasedSource` with its
 * registry on server a, the dialect's database source with each shard's counter installed on
 * its home server alone and the source routed there by the suite's map, and `RedisSource` on a
 * Redis server of its own.
 *
 * @example
 * ```ts
 * import {
 *   describeRoutedAdapter,
 *   type MysqlPoolLike,
 *   routedSources,
 *   type SourcePackages,
 * } from '@shardflake/conformance'
 * // The modules, imported by the adapter's test: `import * as postgres from '@shardflake/postgres'`, ...
 * declare const packages: SourcePackages<MysqlPoolLike>
 * declare const routedBlogOnTypeorm: Parameters<typeof describeRoutedAdapter>[1]['setup']
 *
 * describeRoutedAdapter('TypeORM / PostgreSQL', {
 *   dialect: 'postgres',
 *   sources: routedSources('postgres', packages),
 *   setup: (context) => routedBlogOnTypeorm(context),
 * })
 * ```
 */
export function routedSources<Pool extends MysqlPoolLike>(
  dialect: Dialect,
  packages: SourcePackages<Pool>,
): RoutedSourceCase[] {
  return [
    inProcessCase,
    {
      name: 'async in-process',
      create: ({ sharding }) => asAsync(new InProcessSource({ sharding, shards: 'all' })),
    },
    dialect === 'postgres' ? postgresLeased(packages.postgres) : mysqlLeased(packages.mysql),
    dialect === 'postgres' ? postgresAtHomes(packages.postgres) : mysqlAtHomes(packages.mysql),
    redisCase(packages.redis),
  ]
}

/** The in-process generator over every shard: the suite's source when none is given. */
export const inProcessCase: RoutedSourceCase = {
  name: 'in-process',
  create: ({ sharding }) => new InProcessSource({ sharding, shards: 'all' }),
}

/** The map's ranges with each server name replaced by that server's URL. */
function rangesToUrls(map: ShardMap<string>, servers: HomeServers): ShardRange<string>[] {
  return map.ranges.map(({ from, to, target }) => ({
    from,
    to,
    target: servers.server(target).url,
  }))
}

function postgresPool(url: string, max: number): pg.Pool {
  const pool = new pg.Pool({ connectionString: url, max })
  pool.on('error', () => undefined) // an idle connection ended by the server
  return pool
}

const leasedSharding = testLeasedSharding(4)

function postgresLeased(postgres: PostgresPackage): RoutedSourceCase {
  return {
    name: 'LeasedSource (registry on server a)',
    sharding: leasedSharding,
    async create({ sharding, servers }) {
      const pool = postgresPool(servers.server('a').url, 2)
      const registry = new postgres.PostgresLeaseRegistry(pool)
      const source = await LeasedSource.start({ sharding, registry }).catch(async (error) => {
        await pool.end()
        throw error
      })
      return withClose(source, () => pool.end())
    },
  }
}

function mysqlLeased<Pool extends MysqlPoolLike>(mysql: MysqlPackage<Pool>): RoutedSourceCase {
  return {
    name: 'LeasedSource (registry on server a)',
    sharding: leasedSharding,
    async create({ sharding, servers }) {
      const pool = await mysql.createMysqlPool({ uri: servers.server('a').url, connectionLimit: 2 })
      const registry = new mysql.MysqlLeaseRegistry(pool, { database: 'shardflake_leases' })
      const source = await LeasedSource.start({ sharding, registry }).catch(async (error) => {
        await pool.end()
        throw error
      })
      return withClose(source, () => pool.end())
    },
  }
}

/** Shard schemas `shard_<n>` whose sequences have handed out a value, on each server. */
async function postgresDrawn(servers: HomeServers): Promise<ShardDrawn[]> {
  const drawn: ShardDrawn[] = []
  for (const server of servers.servers) {
    const rows = await server.query(
      `SELECT DISTINCT substring(schemaname FROM 7)::int AS shard FROM pg_sequences
       WHERE schemaname ~ '^shard_[0-9]+$' AND last_value IS NOT NULL`,
    )
    for (const { shard } of rows as { shard: number }[]) drawn.push({ server: server.name, shard })
  }
  return drawn
}

function postgresAtHomes(postgres: PostgresPackage): RoutedSourceCase {
  return {
    name: 'PostgresSource (next_id() on each home server)',
    async create({ sharding, map, servers }) {
      for (const { from, to, target } of map.ranges) {
        const pool = postgresPool(servers.server(target).url, 1)
        try {
          await postgres.installPostgres(pool, { sharding, shards: { from, to } })
        } finally {
          await pool.end()
        }
      }
      return new postgres.PostgresSource({ sharding, databases: rangesToUrls(map, servers) })
    },
    drawn: postgresDrawn,
  }
}

/** Shard databases `shard_<n>` whose counter has moved, on each server. */
async function mysqlDrawn(servers: HomeServers): Promise<ShardDrawn[]> {
  const drawn: ShardDrawn[] = []
  for (const server of servers.servers) {
    const schemas = (await server.query(
      `SELECT TABLE_SCHEMA AS name FROM information_schema.TABLES
       WHERE TABLE_NAME = 'sf_counter' AND TABLE_SCHEMA REGEXP '^shard_[0-9]+$'`,
    )) as { name: string }[]
    if (schemas.length === 0) continue
    const rows = (await server.query(
      schemas
        .map(({ name }) => `SELECT '${name}' AS name, v FROM \`${name}\`.sf_counter WHERE k = 1`)
        .join(' UNION ALL '),
    )) as { name: string; v: string }[]
    for (const { name, v } of rows) {
      if (BigInt(v) > 0n) drawn.push({ server: server.name, shard: Number(name.slice(6)) })
    }
  }
  return drawn
}

function mysqlAtHomes<Pool extends MysqlPoolLike>(mysql: MysqlPackage<Pool>): RoutedSourceCase {
  return {
    name: 'MysqlSource (routines on each home server)',
    async create({ sharding, map, servers }) {
      for (const { from, to, target } of map.ranges) {
        const pool = await mysql.createMysqlPool({
          uri: servers.server(target).url,
          connectionLimit: 1,
        })
        try {
          await mysql.installMysql(pool, { sharding, shards: { from, to } })
        } finally {
          await pool.end()
        }
      }
      return new mysql.MysqlSource({ sharding, databases: rangesToUrls(map, servers) })
    },
    drawn: mysqlDrawn,
  }
}

function redisCase(redis: RedisPackage): RoutedSourceCase {
  return {
    name: 'RedisSource (a Redis server of its own)',
    async create({ sharding }) {
      const server = await startRedis({ name: 'routed-ids' })
      try {
        return withClose(new redis.RedisSource({ sharding, servers: server.url }), () =>
          server.stop(),
        )
      } catch (error) {
        await server.stop()
        throw error
      }
    },
  }
}
