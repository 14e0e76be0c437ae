/**
 * The databases a run writes to, and the sources behind each sharded table. Every source gets
 * the one `sharding` of the run: the layout and the logical shards authors are spread over.
 */
import {
  defineSharding,
  type IdSource,
  InProcessSource,
  instagram,
  type Sharding,
} from '@shardflake/core'
import { createMysqlPool, detectDialect, installMysql, MysqlSource } from '@shardflake/mysql'
import mysql, { type RowDataPacket } from 'mysql2/promise'
import pg from 'pg'
import type { BenchmarkConfig, Keyed } from './benchmark.ts'
import { AutoPost, InProcessPost, PrefetchedPost, ShardedPost } from './entities.ts'

/** What a run writes through. */
export interface Setup {
  /** The server and its version, for the report. */
  server: string
  sharding: Sharding
  /** TypeORM options for the run's database. */
  options: { type: 'mysql' | 'mariadb' | 'postgres'; url: string }
  /** The database-keyed baseline first, then every sharded table with its source. */
  variants: Keyed[]
  /** Closes every source (and the pools they opened). */
  close(): Promise<void>
}

/** The run's sharding: the Instagram layout over `logicalShards` shards. */
export function shardingOf(config: Pick<BenchmarkConfig, 'logicalShards'>): Sharding {
  return defineSharding({ layout: instagram, logicalShards: config.logicalShards })
}

/**
 * MariaDB/MySQL: database `config.database` for the tables, one database per logical shard
 * (`${database}_s<n>`) with its routines, `MysqlSource` with and without a prefetch buffer, and
 * optionally the in-process source.
 */
export async function setupMysql(config: BenchmarkConfig): Promise<Setup> {
  const { database, prefetch, maxAgeMs, inProcess } = config
  const sharding = shardingOf(config)
  const url = new URL(process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test')
  const admin = await mysql.createConnection({ uri: url.toString() })
  await admin.query(`DROP DATABASE IF EXISTS ${database}`)
  await admin.query(`CREATE DATABASE ${database}`)
  await admin.end()
  url.pathname = `/${database}`
  const pool = await createMysqlPool({ uri: url.toString(), connectionLimit: 4 })
  const dialect = await detectDialect(pool)
  const schemaPrefix = `${database}_s`
  await installMysql(pool, { sharding, shards: 'all', schemaPrefix })
  const [versions] = await pool.query<RowDataPacket[]>('SELECT VERSION() AS v')
  // Every ID a round trip: reserve_ids(n) on the source's own pool, next to the save's transaction.
  const sources: IdSource[] = [new MysqlSource({ sharding, databases: pool, schemaPrefix })]
  const variants: Keyed[] = [
    { name: 'AUTO_INCREMENT', entity: AutoPost, table: 'posts_auto' },
    {
      name: '@ShardedId (MysqlSource)',
      entity: ShardedPost,
      table: 'posts_sharded',
      source: sources[0]!,
    },
  ]
  if (prefetch > 0) {
    // The same routines, `prefetch` IDs per round trip per shard, handed out from memory.
    const buffered = new MysqlSource({
      sharding,
      databases: url.toString(),
      schemaPrefix,
      prefetch: { size: prefetch, maxAgeMs },
    })
    sources.push(buffered)
    variants.push({
      name: `@ShardedId (MysqlSource, prefetch ${prefetch})`,
      entity: PrefetchedPost,
      table: 'posts_sharded_prefetch',
      source: buffered,
    })
  }
  if (inProcess) {
    // Shards served in-process must not also be served by the routines: this table's rows are
    // never compared with the others' IDs, and the run's database is dropped next time.
    const local = new InProcessSource({ sharding, shards: 'all' })
    sources.push(local)
    variants.push({
      name: '@ShardedId (InProcessSource)',
      entity: InProcessPost,
      table: 'posts_sharded_inproc',
      source: local,
    })
  }
  return {
    server: `${dialect === 'mariadb' ? 'MariaDB' : 'MySQL'} ${String(versions[0]?.v)}`,
    sharding,
    options: { type: dialect === 'mariadb' ? 'mariadb' : 'mysql', url: url.toString() },
    variants,
    close: async () => {
      for (const source of sources) await source.close()
      await pool.end()
    },
  }
}

/** PostgreSQL: database `config.database`, the in-process source against an identity column. */
export async function setupPostgres(config: BenchmarkConfig): Promise<Setup> {
  const { database } = config
  const sharding = shardingOf(config)
  const url = new URL(process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test')
  const admin = new pg.Client({ connectionString: url.toString() })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS ${database}`)
  await admin.query(`CREATE DATABASE ${database}`)
  const { rows } = await admin.query('SHOW server_version')
  await admin.end()
  url.pathname = `/${database}`
  const source = new InProcessSource({ sharding, shards: 'all' })
  return {
    server: `PostgreSQL ${rows[0].server_version}`,
    sharding,
    options: { type: 'postgres', url: url.toString() },
    variants: [
      { name: 'identity (bigserial)', entity: AutoPost, table: 'posts_auto' },
      { name: '@ShardedId (InProcessSource)', entity: ShardedPost, table: 'posts_sharded', source },
    ],
    close: async () => {
      source.close()
    },
  }
}
