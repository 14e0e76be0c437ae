/**
 * The conformance suite for TypeORM with the database-backed sources, on both databases. Shared
 * by both TypeORM majors.
 */
import { describeAdapter } from '@shardflake/conformance'
import { blogOnTypeorm } from './blog'
import { redisSource } from './sources'

export function describeDatabaseSources(major: string): void {
  const tag = major.replace(/\W/g, '')
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
}
