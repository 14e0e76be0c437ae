import { join } from 'node:path'
import { describeShardHomes } from '@shardflake/conformance'
import pg from 'pg'
import { PostgresShardDirectory } from '../src'

describeShardHomes('PostgresShardDirectory', {
  dialect: 'postgres',
  openDirectory(url, options) {
    const pool = new pg.Pool({ connectionString: url, max: 3 })
    pool.on('error', () => undefined)
    return { directory: new PostgresShardDirectory(pool, options), end: () => pool.end() }
  },
  childScript: join(import.meta.dirname, 'fixtures', 'homes-child.mjs'),
})
