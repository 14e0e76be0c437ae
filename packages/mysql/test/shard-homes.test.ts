import { join } from 'node:path'
import { describeShardHomes } from '@shardflake/conformance'
import { MysqlShardDirectory } from '../src'
import { createPool } from './helpers'

describeShardHomes('MysqlShardDirectory', {
  dialect: 'mysql',
  openDirectory(url, options) {
    const pool = createPool(url, { connectionLimit: 3 })
    return { directory: new MysqlShardDirectory(pool, options), end: () => pool.end() }
  },
  childScript: join(import.meta.dirname, 'fixtures', 'homes-child.mjs'),
})
