import { join } from 'node:path'
import { describeRowMoves } from '@shardflake/conformance'
import { MysqlShardDirectory, mysqlRowStore } from '../src'
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
  childScript: join(import.meta.dirname, 'fixtures', 'row-move-child.mjs'),
})
