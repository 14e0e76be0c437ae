import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import type { IdSource } from '@shardflake/core'
import { PrismaClient as MysqlClient } from '../../generated/mysql/client/client'
import { models as mysqlModels } from '../../generated/mysql/shardflake'
import { PrismaClient as PgClient } from '../../generated/pg/client/client'
import { models, shardedIds as pgShardedIds } from '../../generated/pg/shardflake'
import { shardedIds } from '../../src'

export { models }

/**
 * The blog's Prisma client on PostgreSQL (adapter-pg), with the extension the generator wrote
 * (its models bound: no `models` option).
 */
export function pgClient(url: string, source: IdSource, pool = 10) {
  const adapter = new PrismaPg({ connectionString: url, max: pool })
  return new PgClient({ adapter }).$extends(pgShardedIds({ source }))
}

/** adapter-mariadb for a `mysql://` URL. */
function mariadbAdapter(url: string, pool = 10) {
  const target = new URL(url)
  return new PrismaMariaDb({
    host: target.hostname,
    port: Number(target.port || 3306),
    user: decodeURIComponent(target.username),
    password: decodeURIComponent(target.password),
    database: target.pathname.slice(1),
    connectionLimit: pool,
  })
}

/** The blog's Prisma client on MariaDB (adapter-mariadb), with the extension and `models` passed. */
export function mysqlClient(url: string, source: IdSource, pool = 10) {
  // A shard column needs IDs that carry a shard: ticket servers get the models without Tagged.
  const models = source.sharding ? mysqlModels : { ...mysqlModels, Tagged: { relations: {} } }
  return new MysqlClient({ adapter: mariadbAdapter(url, pool) }).$extends(
    shardedIds({ source, models }),
  )
}

export type PgBlogClient = ReturnType<typeof pgClient>
export type MysqlBlogClient = ReturnType<typeof mysqlClient>

/**
 * The blog client for a dialect, typed as the PostgreSQL one: the models are the same; only
 * `createManyAndReturn` is missing on MariaDB, so callers check the dialect before using it.
 */
export function blogClient(dialect: 'postgres' | 'mysql', url: string, source: IdSource) {
  return samePrismaModels(dialect === 'postgres' ? pgClient(url, source) : mysqlClient(url, source))
}

function samePrismaModels<P extends PgBlogClient | MysqlBlogClient>(client: P): PgBlogClient
function samePrismaModels(client: PgClient | MysqlClient): PgClient
function samePrismaModels(
  client: PgBlogClient | MysqlBlogClient | PgClient | MysqlClient,
): PgBlogClient | PgClient {
  return client as PgBlogClient | PgClient
}

/**
 * The blog's Prisma client for a dialect without the extension, typed as the PostgreSQL one (the
 * models are the same): for tests that add `shardedIds` in another order.
 */
export function bareClient(dialect: 'postgres' | 'mysql', url: string): PgClient {
  if (dialect === 'postgres') {
    return new PgClient({ adapter: new PrismaPg({ connectionString: url }) })
  }
  return samePrismaModels(new MysqlClient({ adapter: mariadbAdapter(url) }))
}
