import { PGlite } from '@electric-sql/pglite'
import { describeIdSource } from '@shardflake/conformance'
import { ShardMap } from '@shardflake/core'
import pg from 'pg'
import { installPostgres, PostgresSource, type SqlClient } from '../src/index'
import { createDatabase, dropDatabase, sharding } from './helpers'

let pools: pg.Pool[] = []

describeIdSource('PostgresSource (two databases)', {
  shards: [3, 12],
  async create() {
    const urls = [await createDatabase('sf_pg_conf_a'), await createDatabase('sf_pg_conf_b')]
    pools = urls.map((url) =>
      new pg.Pool({ connectionString: url, max: 8 }).on('error', () => undefined),
    )
    await installPostgres(pools[0]!, { sharding, shards: '0-7' })
    await installPostgres(pools[1]!, { sharding, shards: '8-15' })
    const map = new ShardMap<SqlClient>(sharding, [
      { from: 0, to: 7, target: pools[0]! },
      { from: 8, to: 15, target: pools[1]! },
    ])
    return new PostgresSource({ sharding, databases: map })
  },
  foreignShard: 16,
  async teardown() {
    await Promise.all(pools.map((pool) => pool.end()))
    await dropDatabase('sf_pg_conf_a')
    await dropDatabase('sf_pg_conf_b')
  },
})

let pglite: PGlite | undefined

describeIdSource('PostgresSource (PGlite, prefetch)', {
  shards: [0, 1],
  async create() {
    pglite = new PGlite()
    await installPostgres(pglite, { sharding, shards: '0-1' })
    return new PostgresSource({
      sharding,
      databases: pglite,
      prefetch: { size: 64, maxAgeMs: 5000 },
    })
  },
  concurrency: 8,
  idsPerCaller: 500,
  async teardown() {
    await pglite?.close()
  },
})
