import { join } from 'node:path'
import { describeRowMoves } from '@shardflake/conformance'
import {
  installMysql,
  MysqlShardDirectory,
  MysqlSource,
  moveMysqlShards,
  mysqlRowStore,
} from '../src'
import { createPool } from './helpers'

describeRowMoves('MariaDB', {
  dialect: 'mysql',
  openDirectory(url, options) {
    const pool = createPool(url, { connectionLimit: 2 })
    return { directory: new MysqlShardDirectory(pool, options), end: () => pool.end() }
  },
  openStore(url) {
    const pool = createPool(url, { connectionLimit: 2 })
    return { store: mysqlRowStore(pool), end: () => pool.end() }
  },
  async openIdSources(urls, sharding, map) {
    const pools = new Map(
      Object.entries(urls).map(([name, url]) => [name, createPool(url, { connectionLimit: 4 })]),
    )
    for (const { from, to, target } of map.ranges) {
      await installMysql(pools.get(target)!, { sharding, shards: { from, to } })
    }
    const sources = Object.fromEntries(
      [...pools].map(([name, pool]) => [name, new MysqlSource({ sharding, databases: pool })]),
    )
    return {
      sources,
      async moveIds({ shards, from, to }) {
        await moveMysqlShards({ sharding, shards, from: pools.get(from)!, to: pools.get(to)! })
      },
      async end() {
        for (const source of Object.values(sources)) await source.close()
        for (const pool of pools.values()) await pool.end()
      },
    }
  },
  childScript: join(import.meta.dirname, 'fixtures', 'row-move-child.mjs'),
})
