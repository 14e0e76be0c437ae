import { MisplacedIdError, ShardKeyChangedError } from '@shardflake/core'
import { expect, it } from 'vitest'
import { findError } from '../routing'
import { settle } from './settle'
import type { AdapterSuiteState } from './suite-state'

/**
 * The `shardColumn` option: `tagged.lshard` holds the logical shard of each row's ID, filled by
 * the adapter on single and batch inserts, read back through raw SQL; a caller's value on another
 * shard is refused before anything is written.
 */
export function testShardColumn(s: AdapterSuiteState): void {
  const stored = async (ids: readonly unknown[]) => {
    const list = ids.map((_, i) => s.p(i + 1)).join(', ')
    return s.rows(
      `SELECT id, tenant, lshard FROM tagged WHERE id IN (${list})`,
      ids.map((id) => String(id)),
    )
  }

  it("fills the shard column with the ID's shard on a single insert", async () => {
    const id = await s.blog.createTagged('tenant-single')
    const rows = await stored([id])
    expect(rows).toHaveLength(1)
    expect(Number(rows[0]!.lshard)).toBe(s.shardOf(rows[0]!.id))
    expect(Number(rows[0]!.lshard)).toBe(s.sharding.shardForKey('tenant-single'))
  })

  it("fills the shard column of every row of a batch insert with its ID's shard", async () => {
    const tenants = Array.from({ length: 40 }, (_, i) => `tenant-batch-${i}`)
    const ids = await s.blog.createTaggedMany(tenants)
    expect(ids).toHaveLength(40)
    const rows = await stored(ids)
    expect(rows).toHaveLength(40)
    for (const row of rows) {
      expect(Number(row.lshard)).toBe(s.shardOf(row.id))
      expect(Number(row.lshard)).toBe(s.sharding.shardForKey(String(row.tenant)))
    }
    expect(new Set(rows.map((row) => Number(row.lshard))).size).toBeGreaterThan(1)
  })

  it("keeps a caller's shard column value that is the ID's shard, and refuses another with MisplacedIdError before anything is written", async () => {
    const shard = s.sharding.shardForKey('tenant-given')
    const id = await s.blog.createTagged('tenant-given', shard)
    expect(Number((await stored([id]))[0]!.lshard)).toBe(shard)
    const before = await s.count('SELECT COUNT(*) FROM tagged')
    s.counting.reset()
    const wrong = (shard + 1) % s.sharding.logicalShards
    const failure = await settle(s.blog.createTagged('tenant-given', wrong))
    expect(findError(failure, MisplacedIdError)).toBeInstanceOf(MisplacedIdError)
    expect(await s.count('SELECT COUNT(*) FROM tagged')).toBe(before)
    expect(s.counting.idsIssued).toBe(0)
  })

  it('refuses an update that sets the shard column to another shard with ShardKeyChangedError, and lets one keep it', async () => {
    const id = await s.blog.createTagged('tenant-updated')
    const shard = s.shardOf(id)
    await s.blog.updateTaggedShard(id, shard)
    const wrong = (shard + 1) % s.sharding.logicalShards
    const failure = await settle(s.blog.updateTaggedShard(id, wrong))
    expect(findError(failure, ShardKeyChangedError)).toBeInstanceOf(ShardKeyChangedError)
    expect(Number((await stored([id]))[0]!.lshard)).toBe(shard)
  })
}
