import { join } from 'node:path'
import { describeRowMoves } from '@shardflake/conformance'
import pg from 'pg'
import {
  installPostgres,
  movePostgresShards,
  PostgresShardDirectory,
  PostgresSource,
  postgresRowStore,
} from '../src'

describeRowMoves('PostgreSQL', {
  dialect: 'postgres',
  openDirectory(url, options) {
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    pool.on('error', () => undefined)
    return { directory: new PostgresShardDirectory(pool, options), end: () => pool.end() }
  },
  openStore(url) {
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    pool.on('error', () => undefined)
    return { store: postgresRowStore(pool), end: () => pool.end() }
  },
  async openIdSources(urls, sharding, map) {
    const pools = new Map(
      Object.entries(urls).map(([name, url]) => {
        const pool = new pg.Pool({ connectionString: url, max: 4 })
        pool.on('error', () => undefined)
        return [name, pool]
      }),
    )
    for (const { from, to, target } of map.ranges) {
      await installPostgres(pools.get(target)!, { sharding, shards: { from, to } })
    }
    const sources = Object.fromEntries(
      [...pools].map(([name, pool]) => [name, new PostgresSource({ sharding, databases: pool })]),
    )
    return {
      sources,
      async moveIds({ shards, from, to }) {
        await movePostgresShards({ sharding, shards, from: pools.get(from)!, to: pools.get(to)! })
      },
      async end() {
        for (const source of Object.values(sources)) await source.close()
        for (const pool of pools.values()) await pool.end()
      },
    }
  },
  childScript: join(import.meta.dirname, 'fixtures', 'row-move-child.mjs'),
})
