import { describe, expect, it } from 'vitest'
import { allocateIds, type IdSource, InvalidArgumentError, MAX_IDS_PER_CALL } from '../src'
import { openSource, sharding } from './support'

/** An async source over the in-process generator that records what it was asked. */
function recording() {
  const inner = openSource({ shards: 'all' })
  const calls: string[] = []
  const source: IdSource = {
    sharding,
    synchronous: false,
    async nextId(shard) {
      calls.push(`nextId(${shard})`)
      return inner.nextId(shard)
    },
    async nextIds(shard, count) {
      calls.push(`nextIds(${shard}, ${count})`)
      return inner.nextIds(shard, count)
    },
    close: () => inner.close(),
  }
  return { source, calls }
}

/**
 * A source that makes no real IDs, just counts: `nextIds` returns consecutive numbers in the
 * time field, on the shard asked for, and refuses counts above MAX_IDS_PER_CALL like every source.
 */
function counting(synchronous: boolean) {
  const counts: number[] = []
  let next = 0n
  const make = (count: number, shard = 0) => {
    if (count > MAX_IDS_PER_CALL) throw new InvalidArgumentError(`count ${count}`)
    counts.push(count)
    return Array.from({ length: count }, () => (next++ << 23n) | (BigInt(shard) << 10n))
  }
  const source: IdSource = synchronous
    ? {
        sharding,
        synchronous: true,
        nextId: (shard) => make(1, shard)[0]!,
        nextIds: (shard, count) => make(count, shard),
        close() {},
      }
    : {
        sharding,
        synchronous: false,
        nextId: async (shard) => make(1, shard)[0]!,
        nextIds: async (shard, count) => make(count, shard),
        close() {},
      }
  return { source, counts }
}

describe('allocateIds', () => {
  it('asks nextIds once per distinct shard and returns IDs in row order', async () => {
    const { source, calls } = recording()
    const ids = await allocateIds(source, [5, 9, 5])
    expect(calls.sort()).toEqual(['nextIds(5, 2)', 'nextIds(9, 1)'])
    expect(ids.map((id) => sharding.shardOfId(id))).toEqual([5, 9, 5])
    expect(ids[0]! < ids[2]!).toBe(true)
  })

  it('with singleNextId, asks nextId for a shard that needs one ID (prefetch buffers)', async () => {
    const { source, calls } = recording()
    const ids = await allocateIds(source, [5, 9, 5], undefined, { singleNextId: true })
    expect(calls.sort()).toEqual(['nextId(9)', 'nextIds(5, 2)'])
    expect(ids.map((id) => sharding.shardOfId(id))).toEqual([5, 9, 5])
    await source.close()
    const sync = openSource({ shards: [7] })
    const [one] = allocateIds(sync, [7], undefined, { singleNextId: true })
    expect(sharding.shardOfId(one!)).toBe(7)
  })

  for (const synchronous of [true, false]) {
    it(`splits a batch above MAX_IDS_PER_CALL into calls of at most that many (${synchronous ? 'sync' : 'async'} source)`, async () => {
      const { source, counts } = counting(synchronous)
      const shards = new Array<number>(MAX_IDS_PER_CALL + 5).fill(3)
      shards[1] = 8
      const ids = await allocateIds(source, shards)
      expect(counts.sort((a, b) => a - b)).toEqual([1, 4, MAX_IDS_PER_CALL])
      expect(ids).toHaveLength(MAX_IDS_PER_CALL + 5)
      expect(new Set(ids).size).toBe(ids.length)
    })
  }

  it("refuses a source's answer that is not the IDs asked for, before any row gets one", async () => {
    const answers: Record<string, (shard: number, count: number) => unknown> = {
      'too few': (shard, count) =>
        Array.from({ length: count - 1 }, (_, i) => sharding.layout.composeTime(5, shard, 0, i)),
      'another shard at the end': (shard, count) =>
        Array.from({ length: count }, (_, i) =>
          sharding.layout.composeTime(5, i === count - 1 ? shard + 1 : shard, 0, i),
        ),
      'another shard first': (shard, count) =>
        Array.from({ length: count }, (_, i) =>
          sharding.layout.composeTime(5, i === 0 ? shard + 1 : shard, 0, i),
        ),
      'numbers, not bigints': (_shard, count) => Array.from({ length: count }, (_, i) => i + 1),
    }
    const errors: Record<string, string> = {}
    for (const [name, answer] of Object.entries(answers)) {
      for (const synchronous of [true, false]) {
        // A source that breaks its contract: what it answers is not the IDs it was asked for.
        const broken = (shard: number, count: number) => answer(shard, count) as bigint[]
        const source: IdSource = {
          sharding,
          synchronous,
          nextId: (shard) => broken(shard, 1)[0]!,
          nextIds: (shard, count) =>
            synchronous ? broken(shard, count) : Promise.resolve(broken(shard, count)),
          close() {},
        }
        const error = await (async () => allocateIds(source, [4, 4, 4]))().catch((e) => e)
        errors[`${name}, ${synchronous ? 'sync' : 'async'}`] =
          `${error.constructor.name}: ${error.message}`
      }
    }
    expect(errors).toMatchSnapshot()
  })
})
