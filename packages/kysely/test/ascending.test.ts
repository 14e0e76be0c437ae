/**
 * A multi-row INSERT with an in-process source gets IDs ascending in row order, so it appends to
 * the primary key's B-tree: checked on MariaDB (InnoDB clusters rows by primary key) against
 * AUTO_INCREMENT and against IDs per shard in row order, the same rows in the same order. Page
 * counts are deterministic for a given key order: sizes are compared, never timings. The
 * source's clock moves 1 s before each batch, so every batch has room to ascend.
 *
 * ASCENDING_BATCHES=40 runs the 40 x 1000 rows of the package's bench/RESULTS.md and prints them.
 */
import { freshDatabase, type RawDatabase } from '@shardflake/conformance'
import { allocateIds, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { type Generated, Kysely, MysqlDialect } from 'kysely'
import mysql from 'mysql2'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type ShardedId, type ShardedIdsPlugin, shardedIds } from '../src'

const batches = Number(process.env.ASCENDING_BATCHES ?? 8)
const rowsPerBatch = 1000
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

interface Member {
  email: string
  tenant: number
}
interface Database {
  members: Member & { id: ShardedId }
  members_auto: Member & { id: Generated<string> }
  members_per_shard: Member & { id: bigint | string }
}

describe('INSERT of 1000 rows on MariaDB: primary key pages', () => {
  let raw: RawDatabase
  let source: InProcessSource
  let ids: ShardedIdsPlugin<Database>
  let db: Kysely<Database>
  let skew = 0

  beforeAll(async () => {
    raw = await freshDatabase('mysql', 'sf_kysely_ascending_my')
    for (const table of ['members', 'members_auto', 'members_per_shard']) {
      const key = table === 'members_auto' ? 'BIGINT NOT NULL AUTO_INCREMENT' : 'BIGINT NOT NULL'
      await raw.query(
        `CREATE TABLE ${table} (id ${key} PRIMARY KEY, email VARCHAR(200) NOT NULL, tenant INTEGER NOT NULL)`,
      )
    }
    source = new InProcessSource({ sharding, shards: 'all', clock: () => Date.now() + skew })
    source.nextId(0) // the source's first clock reading: no batch takes time before it
    ids = shardedIds<Database>({ source, tables: { members: { shardBy: 'tenant' } } })
    const pool = mysql.createPool({
      uri: raw.url,
      connectionLimit: 2,
      supportBigNumbers: true,
      bigNumberStrings: true,
    })
    db = new Kysely<Database>({ dialect: ids.dialect(new MysqlDialect({ pool })), plugins: [ids] })
  })
  afterAll(async () => {
    await db?.destroy()
    source?.close()
    await raw?.close()
  })

  async function size(table: string): Promise<{ leafPages: number; bytes: number }> {
    await raw.query(`ANALYZE TABLE ${table} PERSISTENT FOR ALL`)
    const [pages] = await raw.query(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'`,
      [table],
    )
    const [bytes] = await raw.query(
      'SELECT data_length AS v FROM information_schema.TABLES WHERE table_schema = DATABASE() AND table_name = ?',
      [table],
    )
    return { leafPages: Number(pages?.v), bytes: Number(bytes?.v) }
  }

  it('gives rows of 16 shards IDs ascending in row order, as compact as AUTO_INCREMENT', async () => {
    let seed = 4242
    const next = () => {
      seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
      return seed
    }
    for (let b = 0; b < batches; b++) {
      const rows = Array.from({ length: rowsPerBatch }, (_, i) => ({
        email: `m${b}.${i}@x.io`,
        tenant: next() % 100_000,
      }))
      const shards = rows.map((row) => sharding.shardForKey(row.tenant))
      // Unused time behind the source's clock, as between the batches of an application.
      skew += 1000
      await db.insertInto('members').values(rows).execute()
      await db.insertInto('members_auto').values(rows).execute()
      // The same rows with IDs per shard, in row order: what the plugin gave before.
      const perShard = allocateIds(source, shards)
      await db
        .insertInto('members_per_shard')
        .values(rows.map((row, i) => ({ ...row, id: perShard[i]! })))
        .execute()
      const stored = await raw.query(
        'SELECT CAST(id AS CHAR) AS id, email FROM members WHERE email LIKE ?',
        [`m${b}.%`],
      )
      expect(stored).toHaveLength(rowsPerBatch)
      const byRow = new Array<bigint>(rowsPerBatch)
      for (const row of stored)
        byRow[Number(String(row.email).split(/[.@]/)[1])] = BigInt(String(row.id))
      for (let i = 1; i < rowsPerBatch; i++) {
        expect(byRow[i]! > byRow[i - 1]!, `batch ${b}, row ${i}`).toBe(true)
      }
      byRow.forEach((id, i) => {
        expect(sharding.shardOfId(id), `batch ${b}, row ${i}`).toBe(shards[i])
      })
    }
    const [auto, ascending, perShard] = await Promise.all(
      ['members_auto', 'members', 'members_per_shard'].map((table) => size(table)),
    )
    if (process.env.ASCENDING_BATCHES) {
      console.log(JSON.stringify({ batches, rowsPerBatch, auto, ascending, perShard }))
    }
    expect(auto!.leafPages).toBeGreaterThan(0)
    expect(ascending!.leafPages / auto!.leafPages).toBeLessThanOrEqual(1.05)
    // The measurement tells the two orders apart.
    expect(perShard!.leafPages / auto!.leafPages).toBeGreaterThan(1.05)
  })
})
