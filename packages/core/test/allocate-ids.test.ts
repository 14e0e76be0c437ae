import { describe, expect, it } from 'vitest'
import { allocateIds, type IdSource, InProcessSource, instagram } from '../src'

/** An async source that records what it was asked. */
function recording() {
  const inner = new InProcessSource({ layout: instagram, shards: 'all' })
  const calls: string[] = []
  const source: IdSource = {
    layout: instagram,
    synchronous: false,
    async nextId(shard) {
      calls.push(`nextId(${shard})`)
      return inner.nextId(shard)
    },
    async nextIds(shard, count) {
      calls.push(`nextIds(${shard}, ${count})`)
      return inner.nextIds(shard, count)
    },
  }
  return { source, calls }
}

describe('allocateIds', () => {
  it('asks nextIds once per distinct shard and returns IDs in row order', async () => {
    const { source, calls } = recording()
    const ids = await allocateIds(source, [5, 9, 5])
    expect(calls.sort()).toEqual(['nextIds(5, 2)', 'nextIds(9, 1)'])
    expect(ids.map((id) => instagram.shardOf(id))).toEqual([5, 9, 5])
    expect(ids[0]! < ids[2]!).toBe(true)
  })

  it('with singleNextId, asks nextId for a shard that needs one ID (prefetch buffers)', async () => {
    const { source, calls } = recording()
    const ids = await allocateIds(source, [5, 9, 5], undefined, { singleNextId: true })
    expect(calls.sort()).toEqual(['nextId(9)', 'nextIds(5, 2)'])
    expect(ids.map((id) => instagram.shardOf(id))).toEqual([5, 9, 5])
    const sync = new InProcessSource({ layout: instagram, shards: 'all' })
    const [one] = allocateIds(sync, [7], undefined, { singleNextId: true })
    expect(instagram.shardOf(one!)).toBe(7)
  })
})
