/**
 * The conformance suite for Drizzle, shared by the files of both Drizzle versions (`version` tags
 * the databases, so the two projects never meet).
 */
import {
  asAsync,
  type Dialect,
  describeAdapter,
  describePlainIdAdapter,
} from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import { type BlogTables, blogOnDrizzle, blogTables } from './blog'
import {
  leasedSharding,
  leasedSource,
  mysqlSource,
  postgresSource,
  redisSource,
  ticketSource,
} from './sources'

/** Short tag of a version for database names: `045`, `1`. */
function tagOf(version: string): string {
  return version.startsWith('0.') ? '045' : '1'
}

/**
 * The in-process source, synchronous and behind promises, rules naming columns and rules as
 * functions; `extra` adds variants with other tables (string IDs on Drizzle 1.0).
 */
export function describeInProcess(
  version: string,
  dialect: Dialect,
  extra: [string, (dialect: Dialect) => BlogTables][] = [],
): void {
  const database = dialect === 'postgres' ? 'PostgreSQL' : 'MariaDB'
  const variants: [string, boolean, (dialect: Dialect) => BlogTables][] = [
    ['in-process', false, (d) => blogTables(d)],
    ['async in-process, rules as functions', true, (d) => blogTables(d, 'functions')],
    ...extra.flatMap(([name, tables]): [string, boolean, (d: Dialect) => BlogTables][] => [
      [`in-process, ${name}`, false, tables],
      [`async in-process, ${name}`, true, tables],
    ]),
  ]
  variants.forEach(([name, async, tables], index) => {
    describeAdapter(`Drizzle ${version} / ${database} / ${name}`, {
      dialect,
      database: `sf_drizzle_${tagOf(version)}_${dialect.slice(0, 2)}_${index}`,
      createSource: (_raw, sharding) => {
        const source = new InProcessSource({ sharding, shards: 'all' })
        return async ? asAsync(source) : source
      },
      setup: ({ raw, source }) => blogOnDrizzle(raw, source, tables(dialect)),
    })
  })
}

/** The database-backed sources on both databases, and ticket servers through the plain-ID suite. */
export function describeDatabaseSources(version: string): void {
  const tag = tagOf(version)
  const name = `Drizzle ${version}`
  describeAdapter(`${name} / PostgreSQL / PostgresSource`, {
    dialect: 'postgres',
    database: `sf_drizzle_${tag}_pg_pgsource`,
    createSource: postgresSource,
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
  describeAdapter(`${name} / MariaDB / MysqlSource, rules as functions`, {
    dialect: 'mysql',
    database: `sf_drizzle_${tag}_my_mysource`,
    createSource: (raw, sharding) => mysqlSource(raw, sharding, `${tag}s`),
    setup: ({ raw, source }) => blogOnDrizzle(raw, source, blogTables('mysql', 'functions')),
  })
  describeAdapter(`${name} / PostgreSQL / RedisSource`, {
    dialect: 'postgres',
    database: `sf_drizzle_${tag}_pg_redis`,
    createSource: (_raw, sharding) => redisSource(sharding, `${tag}pg`),
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
  describeAdapter(`${name} / MariaDB / RedisSource`, {
    dialect: 'mysql',
    database: `sf_drizzle_${tag}_my_redis`,
    createSource: (_raw, sharding) => redisSource(sharding, `${tag}my`),
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
  describeAdapter(`${name} / PostgreSQL / LeasedSource (PostgreSQL registry)`, {
    dialect: 'postgres',
    database: `sf_drizzle_${tag}_pg_leased`,
    sharding: leasedSharding,
    createSource: leasedSource,
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
  describeAdapter(`${name} / MariaDB / LeasedSource (MariaDB registry)`, {
    dialect: 'mysql',
    database: `sf_drizzle_${tag}_my_leased`,
    sharding: leasedSharding,
    createSource: leasedSource,
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
  describePlainIdAdapter(`${name} / MariaDB / TicketServerSource`, {
    dialect: 'mysql',
    database: `sf_drizzle_${tag}_tickets`,
    createSource: (raw) => ticketSource(raw, `${tag}t`),
    setup: ({ raw, source }) => blogOnDrizzle(raw, source),
  })
}
