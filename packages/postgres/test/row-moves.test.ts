import { join } from 'node:path'
import { describeRowMoves } from '@shardflake/conformance'
import pg from 'pg'
import { PostgresShardDirectory, postgresRowStore } from '../src'

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
  childScript: join(import.meta.dirname, 'fixtures', 'row-move-child.mjs'),
})
