import {
  defineLayout,
  defineSharding,
  InvalidIdentifierError,
  InvalidLayoutError,
  instagram,
  twitter,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defaultClause, fenceSql, postgresSql, setDefaultSql, shardSql } from '../src/index'
import { createDatabase, dropDatabase, raw, sharding } from './helpers'

const DB = 'sf_pg_sql'
let url: string

beforeAll(async () => {
  url = await createDatabase(DB)
})
afterAll(async () => {
  await dropDatabase(DB)
})

async function exec(script: string): Promise<void> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    await client.query(`SET client_min_messages = warning;\n${script}`)
  } finally {
    await client.end()
  }
}

describe('generated SQL', () => {
  const ddl = postgresSql({ sharding, shards: '5-6' })
  const script = ddl.script

  it('is pinned', async () => {
    await expect(script).toMatchFileSnapshot('__snapshots__/instagram-shards-5-6.sql')
    await expect(shardSql({ sharding, cache: 100 }, 7).script).toMatchFileSnapshot(
      '__snapshots__/instagram-shard-7-cache-100.sql',
    )
    await expect(fenceSql({ sharding }, 5).script).toMatchFileSnapshot(
      '__snapshots__/instagram-fence-shard-5.sql',
    )
    expect(defaultClause(5)).toMatchInlineSnapshot(`"DEFAULT "shard_5".next_id()"`)
    expect(
      setDefaultSql({ table: 'app.posts', shard: 12, schemaPrefix: 's' }),
    ).toMatchInlineSnapshot(
      `"ALTER TABLE "app"."posts" ALTER COLUMN "id" SET DEFAULT "s12".next_id()"`,
    )
  })

  it('runs, twice, and makes IDs of the right shard', async () => {
    await exec(script)
    const [first] = await raw<{ id: string }>(url, 'SELECT shard_5.next_id()::text AS id')
    await exec(script) // idempotent: the sequence keeps its place
    const rows = await raw<{ id: string; shard: number; ts: Date }>(
      url,
      'SELECT x::text AS id, shardflake.shardflake_shard(x) AS shard, shardflake.shardflake_timestamp(x) AS ts FROM shard_6.next_ids(3) x',
    )
    const [second] = await raw<{ id: string }>(url, 'SELECT shard_5.next_id()::text AS id')
    expect(BigInt(second!.id) > BigInt(first!.id)).toBe(true)
    expect(rows.map((r) => r.shard)).toEqual([6, 6, 6])
    for (const row of rows) {
      const decoded = instagram.decompose(row.id)
      expect(decoded.shard).toBe(6)
      expect(decoded.timestampMs).toBe(row.ts.getTime())
      expect(Math.abs(decoded.timestampMs - Date.now())).toBeLessThan(60_000)
    }
    const meta = await raw<{ shard: number; schema_name: string }>(
      url,
      'SELECT shard, schema_name FROM shardflake.shards ORDER BY shard',
    )
    expect(meta).toEqual([
      { shard: 5, schema_name: 'shard_5' },
      { shard: 6, schema_name: 'shard_6' },
    ])
  })

  it('refuses a different layout in the generated script itself (SQLSTATE SF002)', async () => {
    const other = defineLayout({
      epoch: '2020-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const error = await exec(
      postgresSql({
        sharding: defineSharding({ layout: other, logicalShards: 2000 }),
        shards: [5],
      }).script,
    ).catch((e: unknown) => e)
    expect((error as { code?: string }).code).toBe('SF002')
    expect(String((error as Error).message)).toMatch(/refusing to install layout/)
  })

  it('rejects hostile names instead of interpolating them', () => {
    for (const bad of ['x"; DROP TABLE t; --', 'Shard', 'a b', '', 'a.b', `a'b`]) {
      expect(() => postgresSql({ sharding, shards: [1], schemaPrefix: bad })).toThrow(
        InvalidIdentifierError,
      )
      expect(() => postgresSql({ sharding, shards: [1], schema: bad })).toThrow(
        InvalidIdentifierError,
      )
    }
    expect(() => setDefaultSql({ table: 'posts"; drop', shard: 1 })).toThrow(InvalidIdentifierError)
    expect(() => setDefaultSql({ table: 'a.b.c', shard: 1 })).toThrow(InvalidIdentifierError)
    expect(() => setDefaultSql({ table: 'posts', column: 'ID', shard: 1 })).toThrow(
      InvalidIdentifierError,
    )
    expect(() =>
      postgresSql({ sharding: defineSharding({ layout: twitter, logicalShards: 1 }), shards: [1] }),
    ).toThrow(InvalidLayoutError)
  })
})
