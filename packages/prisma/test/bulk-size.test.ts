/**
 * createMany keeps a MariaDB primary key as compact as AUTO_INCREMENT: InnoDB clusters rows by
 * primary key, and rows of interleaved shards (IDs per shard, in row order) split its leaf pages
 * in the middle. The extension sends the rows sorted by ID. Page counts are deterministic for a
 * given key order, so this compares sizes, never timings.
 *
 * BULK_SIZE_BATCHES=40 runs the 40 x 1000 rows of the package's bench/RESULTS.md and prints them.
 */

import type { RawDatabase } from '@shardflake/conformance'
import { allocateIds, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mysqlClient } from './support/clients'
import { blogDatabase } from './support/database'

const batches = Number(process.env.BULK_SIZE_BATCHES ?? 8)
const rowsPerBatch = 1000
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

describe('createMany on MariaDB: primary key pages', () => {
  let raw: RawDatabase
  let source: InProcessSource
  let prisma: ReturnType<typeof mysqlClient>

  beforeAll(async () => {
    raw = await blogDatabase('mysql', 'sf_prisma_my_bulk_size')
    for (const table of ['members_auto', 'members_per_shard']) {
      const key = table === 'members_auto' ? 'BIGINT NOT NULL AUTO_INCREMENT' : 'BIGINT NOT NULL'
      await raw.query(
        `CREATE TABLE ${table} (id ${key} PRIMARY KEY, email VARCHAR(200) NOT NULL UNIQUE, tenant INTEGER NOT NULL)`,
      )
    }
    source = new InProcessSource({ sharding, shards: 'all' })
    prisma = mysqlClient(raw.url, source)
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    source?.close()
    await raw?.close()
  })

  async function leafPages(table: string): Promise<number> {
    await raw.query(`ANALYZE TABLE ${table} PERSISTENT FOR ALL`)
    const [row] = await raw.query(
      `SELECT stat_value AS v FROM mysql.innodb_index_stats WHERE database_name = DATABASE() AND table_name = ? AND index_name = 'PRIMARY' AND stat_name = 'n_leaf_pages'`,
      [table],
    )
    return Number(row?.v)
  }

  it('fills as few leaf pages as AUTO_INCREMENT (rows of 16 shards, 1000 per call)', async () => {
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
      await prisma.member.createMany({ data: rows })
      const values = rows.map(() => '(?, ?)').join(', ')
      await raw.query(
        `INSERT INTO members_auto (email, tenant) VALUES ${values}`,
        rows.flatMap((row) => [row.email, row.tenant]),
      )
      // The same rows with IDs per shard, in row order: what the INSERT got before sorting.
      const ids = allocateIds(
        source,
        rows.map((row) => sharding.shardForKey(row.tenant)),
      )
      await raw.query(
        `INSERT INTO members_per_shard (id, email, tenant) VALUES ${rows.map(() => '(?, ?, ?)').join(', ')}`,
        rows.flatMap((row, i) => [ids[i]!.toString(), row.email, row.tenant]),
      )
    }
    const [auto, sorted, perShard] = await Promise.all(
      ['members_auto', 'members', 'members_per_shard'].map(async (table) => leafPages(table)),
    )
    if (process.env.BULK_SIZE_BATCHES) {
      console.log(JSON.stringify({ batches, rowsPerBatch, leafPages: { auto, sorted, perShard } }))
    }
    expect(auto).toBeGreaterThan(0)
    expect(sorted! / auto!).toBeLessThanOrEqual(1.05)
    // The measurement tells the two orders apart.
    expect(perShard! / auto!).toBeGreaterThan(1.05)
  })
})
