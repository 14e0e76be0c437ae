/**
 * The conformance suite with a LeasedSource: the in-process generator with a worker leased from
 * a registry in the suite's PostgreSQL database, acquired before the first insert and released
 * when the suite closes the source.
 */
import { describeAdapter, testLeasedSharding, withClose } from '@shardflake/conformance'
import { LeasedSource } from '@shardflake/core'
import { PostgresLeaseRegistry } from '@shardflake/postgres'
import pg from 'pg'
import { blogOnPrisma } from './support/blog'

const sharding = testLeasedSharding(4)

describeAdapter('Prisma / PostgreSQL / LeasedSource (PostgreSQL registry)', {
  dialect: 'postgres',
  database: 'sf_prisma_pg_leased',
  sharding,
  createSource: async (raw, sharding) => {
    const pool = new pg.Pool({ connectionString: raw.url, max: 2 })
    pool.on('error', () => undefined) // an idle connection ended by the server
    const source = await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(pool) })
    return withClose(source, () => pool.end())
  },
  setup: async ({ source, raw }) => blogOnPrisma('postgres', raw.url, source),
})
