/**
 * The conformance suite for TypeORM with the database-backed sources, on both databases, and the
 * plain-ID suite with ticket servers. Shared by both TypeORM majors.
 */
import { describeAdapter, describePlainIdAdapter } from '@shardflake/conformance'
import { blogOnTypeorm } from './blog'
import {
  leasedSharding,
  leasedSource,
  mysqlSource,
  postgresSource,
  redisSource,
  ticketSource,
} from './sources'

export function describeDatabaseSources(major: string): void {
  const tag = major.replace(/\W/g, '')
  describeAdapter(`TypeORM ${major} / PostgreSQL / PostgresSource`, {
    dialect: 'postgres',
    database: `sf_typeorm_${tag}_pg_pgsource`,
    createSource: postgresSource,
    setup: ({ raw, source }) => blogOnTypeorm(raw, source),
  })

  describeAdapter(`TypeORM ${major} / PostgreSQL / PostgresSource, bigint IDs, parents by column`, {
    dialect: 'postgres',
    database: `sf_typeorm_${tag}_pg_pgsource_b`,
    createSource: postgresSource,
    setup: ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint', parents: 'column' }),
  })

  describeAdapter(`TypeORM ${major} / MariaDB / MysqlSource`, {
    dialect: 'mysql',
    database: `sf_typeorm_${tag}_my_mysource`,
    createSource: (raw, sharding) => mysqlSource(raw, sharding, `${tag}s`),
    setup: ({ raw, source }) => blogOnTypeorm(raw, source),
  })

  describeAdapter(`TypeORM ${major} / MariaDB / MysqlSource, bigint IDs, parents by column`, {
    dialect: 'mysql',
    database: `sf_typeorm_${tag}_my_mysource_b`,
    createSource: (raw, sharding) => mysqlSource(raw, sharding, `${tag}b`),
    setup: ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint', parents: 'column' }),
  })

  describeAdapter(`TypeORM ${major} / PostgreSQL / RedisSource`, {
    dialect: 'postgres',
    database: `sf_typeorm_${tag}_pg_redis`,
    createSource: (_raw, sharding) => redisSource(sharding, `${tag}pg`),
    setup: ({ raw, source }) => blogOnTypeorm(raw, source),
  })

  describeAdapter(`TypeORM ${major} / MariaDB / RedisSource, bigint IDs, parents by column`, {
    dialect: 'mysql',
    database: `sf_typeorm_${tag}_my_redis`,
    createSource: (_raw, sharding) => redisSource(sharding, `${tag}my`),
    setup: ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint', parents: 'column' }),
  })

  describeAdapter(`TypeORM ${major} / PostgreSQL / LeasedSource (PostgreSQL registry)`, {
    dialect: 'postgres',
    database: `sf_typeorm_${tag}_pg_leased`,
    sharding: leasedSharding,
    createSource: leasedSource,
    setup: ({ raw, source }) => blogOnTypeorm(raw, source),
  })

  describeAdapter(`TypeORM ${major} / MariaDB / LeasedSource (MariaDB registry), bigint IDs`, {
    dialect: 'mysql',
    database: `sf_typeorm_${tag}_my_leased`,
    sharding: leasedSharding,
    createSource: leasedSource,
    setup: ({ raw, source }) => blogOnTypeorm(raw, source, { idType: 'bigint' }),
  })

  describePlainIdAdapter(`TypeORM ${major} / MariaDB / TicketServerSource`, {
    dialect: 'mysql',
    database: `sf_typeorm_${tag}_tickets`,
    createSource: (raw) => ticketSource(raw, `${tag}t`),
    setup: ({ raw, source }) => blogOnTypeorm(raw, source),
  })
}
