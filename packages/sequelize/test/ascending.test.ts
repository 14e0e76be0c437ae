/**
 * A `bulkCreate()` with an in-process source gets IDs ascending in row order, so its INSERT
 * appends to the primary key's B-tree: checked on MariaDB (InnoDB clusters rows by primary key)
 * against AUTO_INCREMENT and against IDs per shard in row order, the same rows in the same order.
 * Page counts are deterministic for a given key order: sizes are compared, never timings. The
 * source's clock moves 1 s before each batch, so every batch has room to ascend.
 *
 * ASCENDING_BATCHES=40 runs the 40 x 1000 rows of the package's bench/RESULTS.md and prints them.
 */
import { freshDatabase, type RawDatabase } from '@shardflake/conformance'
import { allocateIds, defineSharding, InProcessSource, instagram } from '@shardflake/core'
import { DataTypes, type Sequelize } from 'sequelize'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { shardedId, shardedIds } from '../src'
import { sequelizeOn } from './support/blog'

const batches = Number(process.env.ASCENDING_BATCHES ?? 8)
const rowsPerBatch = 1000
const sharding = defineSharding({ layout: instagram, logicalShards: 16 })

describe('bulkCreate() of 1000 rows on MariaDB: primary key pages', () => {
  let raw: RawDatabase
  let source: InProcessSource
  let sequelize: Sequelize
  let skew = 0

  beforeAll(async () => {
    raw = await freshDatabase('mysql', 'sf_sequelize_ascending_my')
    for (const table of ['members', 'members_auto', 'members_per_shard']) {
      const key = table === 'members_auto' ? 'BIGINT NOT NULL AUTO_INCREMENT' : 'BIGINT NOT NULL'
      await raw.query(
        `CREATE TABLE ${table} (id ${key} PRIMARY KEY, email VARCHAR(200) NOT NULL, tenant INTEGER NOT NULL)`,
      )
    }
    source = new InProcessSource({ sharding, shards: 'all', clock: () => Date.now() + skew })
    source.nextId(0) // the source's first clock reading: no batch takes time before it
    sequelize = sequelizeOn(raw)
    shardedIds(sequelize, { source })
  })
  afterAll(async () => {
    await sequelize?.close()
    source?.close()
    await raw?.close()
  })

  function define() {
    const common = { timestamps: false, underscored: true }
    const columns = { email: DataTypes.STRING, tenant: DataTypes.INTEGER }
    return {
      Member: sequelize.define(
        'Member',
        { id: shardedId({ shardBy: 'tenant' }), ...columns },
        { ...common, tableName: 'members' },
      ),
      MemberAuto: sequelize.define(
        'MemberAuto',
        { id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true }, ...columns },
        { ...common, tableName: 'members_auto' },
      ),
      MemberPerShard: sequelize.define(
        'MemberPerShard',
        { id: { type: DataTypes.BIGINT, primaryKey: true }, ...columns },
        { ...common, tableName: 'members_per_shard' },
      ),
    }
  }

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
    const { Member, MemberAuto, MemberPerShard } = define()
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
      const created = await Member.bulkCreate(rows)
      const ids = created.map((member) => BigInt(String(member.get('id'))))
      for (let i = 1; i < ids.length; i++) {
        expect(ids[i]! > ids[i - 1]!, `batch ${b}, row ${i}`).toBe(true)
      }
      ids.forEach((id, i) => {
        expect(sharding.shardOfId(id), `batch ${b}, row ${i}`).toBe(shards[i])
      })
      await MemberAuto.bulkCreate(rows)
      // The same rows with IDs per shard, in row order: what bulkCreate() gave before.
      const perShard = allocateIds(source, shards)
      await MemberPerShard.bulkCreate(
        rows.map((row, i) => ({ ...row, id: perShard[i]!.toString() })),
      )
    }
    const stored = await raw.query('SELECT COUNT(*) AS n FROM members')
    expect(Number(stored[0]?.n)).toBe(batches * rowsPerBatch)
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
