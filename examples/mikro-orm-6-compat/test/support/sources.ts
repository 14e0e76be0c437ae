import type { RawDatabase } from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'

/** `next_id()` installed in the test database for every logical shard; closing ends its pool. */
export async function postgresSource(raw: RawDatabase, sharding: Sharding): Promise<IdSource> {
  const pool = new pg.Pool({ connectionString: raw.url, max: 8 })
  await installPostgres(pool, { sharding, shards: 'all' })
  const source = new PostgresSource({ sharding, databases: pool })
  return {
    sharding: source.sharding,
    synchronous: source.synchronous,
    nextId: (shard, context) => source.nextId(shard, context),
    nextIds: (shard, count, context) => source.nextIds(shard, count, context),
    async close() {
      await source.close()
      await pool.end()
    },
  }
}
