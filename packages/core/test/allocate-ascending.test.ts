/**
 * allocateAscending: a batch's IDs ascend in row order (so a multi-row INSERT appends to the
 * primary key's B-tree), stay unique and on their rows' shards, never run ahead of the clock by
 * more than the drift allowance, never reach back past the look-back window or before the source
 * first read its clock, and fall back to per-shard order (or refuse, typed) when they cannot.
 */
import fc from 'fast-check'
import { describe, expect, it, onTestFinished } from 'vitest'
import {
  allocateAscending,
  allocateIds,
  ConfigurationError,
  defineSharding,
  type IdSource,
  InProcessSource,
  InvalidArgumentError,
  instagram,
  LeasedSource,
  MemoryLeaseRegistry,
  type Sharding,
  ShardOutOfRangeError,
  ShardOverloadedError,
} from '../src'
import { fakeClock } from './support'

const layout = instagram
/** Fake clocks start far apart, so that shard claims of closed sources never reach the next one. */
let base = 1_900_000_000_000
function nextBase(): number {
  base += 100_000_000
  return base
}

/** The time (ms since 1970) an ID carries. */
const msOf = (id: bigint) => layout.epoch + Number(id >> layout.shifts.time)

function random(seed: number) {
  let x = seed
  return () => {
    x = (x * 1_103_515_245 + 12_345) % 2_147_483_648
    return x / 2_147_483_648
  }
}

function shardsInRandomOrder(count: number, logicalShards: number, seed: number): number[] {
  const next = random(seed)
  return Array.from({ length: count }, () => Math.floor(next() * logicalShards))
}

function expectAscending(ids: readonly bigint[]) {
  for (let i = 1; i < ids.length; i++) {
    expect(ids[i]! > ids[i - 1]!, `row ${i}: ${ids[i]} after ${ids[i - 1]}`).toBe(true)
  }
}

/** A warm source: it first read its clock `idleMs` before `now`, and made nothing since. */
function warmSource(sharding: Sharding, idleMs: number, extra: { maxDriftMs?: number } = {}) {
  const time = fakeClock(nextBase())
  const source = new InProcessSource({ sharding, shards: 'all', ...time.options, ...extra })
  onTestFinished(() => source.close())
  source.nextId(0)
  time.clock.now += idleMs
  return { source, clock: time.clock }
}

describe('allocateAscending', () => {
  it('hands out 1000 rows over 16 shards ascending in row order, within the window', () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const { source, clock } = warmSource(sharding, 5_000)
    const shards = shardsInRandomOrder(1000, 16, 7)
    const ids = allocateAscending(source, shards)
    expectAscending(ids)
    expect(ids.map((id) => sharding.shardOfId(id))).toEqual(shards)
    expect(new Set(ids).size).toBe(1000)
    // About one ms per row whose shard is below the previous row's: taken behind the clock.
    const descents = shards.filter((shard, i) => i > 0 && shard < shards[i - 1]!).length
    expect(msOf(ids.at(-1)!) - msOf(ids[0]!)).toBe(descents)
    // It ends at the clock, reaching back no further than it needs.
    expect(msOf(ids.at(-1)!)).toBe(clock.now)
    expect(msOf(ids[0]!)).toBeGreaterThanOrEqual(clock.now - 1000)
    // What comes next for a shard is above that shard's IDs in the batch.
    const later = source.nextIds(shards[0]!, 3)
    const ofShard = ids.filter((_, i) => shards[i] === shards[0])
    for (const id of later) expect(id > ofShard.at(-1)!).toBe(true)
    source.close()
  })

  it('a single row gets the time of the clock, as nextId gives it', () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const { source, clock } = warmSource(sharding, 5_000)
    const [id] = allocateAscending(source, [5])
    expect(msOf(id!)).toBe(clock.now)
    const [second] = allocateAscending(source, [5])
    expect(second).toBe(id! + 1n)
    source.close()
  })

  it('never reaches back before the source first read its clock (a restarted process)', () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const { source, clock } = warmSource(sharding, 0)
    const shards = shardsInRandomOrder(1000, 16, 11)
    // A fresh source has no unused past: 1000 rows would run ~470 ms ahead of the clock.
    expect(source.nextIdsAscending(shards)).toBeUndefined()
    // A few rows fit within the drift allowance ahead of the clock.
    const few = [9, 3, 12, 3, 1]
    const ids = source.nextIdsAscending(few)!
    expectAscending(ids)
    for (const id of ids) {
      expect(msOf(id)).toBeGreaterThanOrEqual(clock.now)
      expect(msOf(id)).toBeLessThanOrEqual(clock.now + 10)
    }
    source.close()
  })

  it('falls back to per-shard order when batches come back to back, and refuses when told', () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const { source, clock } = warmSource(sharding, 5_000)
    const shards = shardsInRandomOrder(1000, 16, 3)
    // A batch ends at the clock: 50 ms later the next one (~470 ms) has no room.
    let first: bigint[] = []
    let error: unknown
    let fitted = 0
    while (fitted < 5) {
      clock.now += 50
      try {
        first = allocateAscending(source, shards, undefined, { fallback: false })
      } catch (caught) {
        error = caught
        break
      }
      expectAscending(first)
      fitted++
    }
    expect(error).toBeInstanceOf(ShardOverloadedError)
    expect(fitted).toBe(1)
    const second = allocateAscending(source, shards)
    expect(second.map((id) => sharding.shardOfId(id))).toEqual(shards)
    expect(new Set([...first, ...second]).size).toBe(2000)
    // Per shard it is ascending and above the first batch (the refused call issued nothing).
    const perShard = new Map<number, bigint>()
    second.forEach((id, i) => {
      const shard = shards[i]!
      const before = perShard.get(shard)
      if (before !== undefined) expect(id > before).toBe(true)
      perShard.set(shard, id)
    })
    const lastOfShard = new Map<number, bigint>()
    first.forEach((id, i) => {
      lastOfShard.set(shards[i]!, id)
    })
    second.forEach((id, i) => {
      expect(id > lastOfShard.get(shards[i]!)!).toBe(true)
    })
    source.close()
  })

  it('orders within each group only when groups are given', () => {
    const sharding = defineSharding({ layout, logicalShards: 64 })
    const { source } = warmSource(sharding, 0, { maxDriftMs: 100 })
    // Two tables, rows interleaved: each table's rows ascend; one order over both would need more.
    const shards = [5, 7, 5, 7, 9, 11, 9, 11]
    const groups = ['a', 'b', 'a', 'b', 'a', 'b', 'a', 'b']
    const ids = allocateAscending(source, shards, undefined, { groups, fallback: false })
    for (const group of ['a', 'b']) {
      expectAscending(ids.filter((_, i) => groups[i] === group))
    }
    expect(new Set(ids).size).toBe(8)
    expect(() => allocateAscending(source, shards, undefined, { groups: ['a'] })).toThrow(
      InvalidArgumentError,
    )
    source.close()
  })

  it('checks its input: shards it does not own, unknown options, a negative look-back', () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const time = fakeClock(nextBase())
    const source = new InProcessSource({ sharding, shards: [1, 2], ...time.options })
    onTestFinished(() => source.close())
    expect(() => allocateAscending(source, [1, 3])).toThrow(ShardOutOfRangeError)
    expect(() => allocateAscending(source, [1], undefined, { order: 'up' } as never)).toThrow(
      InvalidArgumentError,
    )
    expect(() => allocateAscending(source, [1], undefined, { maxLagMs: -1 })).toThrow(
      InvalidArgumentError,
    )
    expect(allocateAscending(source, [])).toEqual([])
    source.close()
  })

  it('a source that cannot order (a database source) gets per-shard order, or a typed refusal', async () => {
    const sharding = defineSharding({ layout, logicalShards: 16 })
    const time = fakeClock(nextBase())
    const inner = new InProcessSource({ sharding, shards: 'all', ...time.options })
    onTestFinished(() => inner.close())
    const remote: IdSource = {
      sharding,
      synchronous: false,
      nextId: async (shard) => inner.nextId(shard),
      nextIds: async (shard, count) => inner.nextIds(shard, count),
      close: () => inner.close(),
    }
    const ids = await allocateAscending(remote, [3, 1, 3])
    expect(ids.map((id) => sharding.shardOfId(id))).toEqual([3, 1, 3])
    expect(() => allocateAscending(remote, [3, 1], undefined, { fallback: false })).toThrow(
      ConfigurationError,
    )
    inner.close()
  })

  it('property: ascending, unique, on its shard, within the window, or nothing issued', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8192 }),
        fc.integer({ min: 1, max: 1500 }),
        fc.integer({ min: 0, max: 3_000 }),
        fc.integer({ min: 0, max: 2_000 }),
        fc.integer({ min: 0, max: 40 }),
        fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), { minLength: 1, maxLength: 3 }),
        fc.boolean(),
        (logicalShards, rows, idleMs, maxLagMs, maxDriftMs, seeds, grouped) => {
          const sharding = defineSharding({ layout, logicalShards })
          const time = fakeClock(nextBase())
          const source = new InProcessSource({
            sharding,
            shards: 'all',
            maxDriftMs,
            ...time.options,
          })
          onTestFinished(() => source.close())
          try {
            const first = time.clock.now
            const issued = new Set<bigint>()
            const lastOf = new Map<number, bigint>()
            const note = (id: bigint, shard: number) => {
              expect(issued.has(id)).toBe(false)
              issued.add(id)
              const before = lastOf.get(shard)
              if (before !== undefined) expect(id > before).toBe(true)
              lastOf.set(shard, id)
            }
            note(source.nextId(0), 0)
            time.clock.now += idleMs
            for (const seed of seeds) {
              const shards = shardsInRandomOrder(rows, logicalShards, seed)
              const groups = grouped ? shards.map((_, i) => (seed + i) % 3) : undefined
              const ids = source.nextIdsAscending(shards, maxLagMs, groups)
              if (ids) {
                ids.forEach((id, i) => {
                  expect(sharding.shardOfId(id)).toBe(shards[i])
                  expect(msOf(id)).toBeLessThanOrEqual(time.clock.now + maxDriftMs)
                  expect(msOf(id)).toBeGreaterThanOrEqual(
                    Math.max(first, time.clock.now - maxLagMs),
                  )
                  note(id, shards[i]!)
                })
                const byGroup = new Map<unknown, bigint>()
                ids.forEach((id, i) => {
                  const before = byGroup.get(groups?.[i])
                  if (before !== undefined) expect(id > before).toBe(true)
                  byGroup.set(groups?.[i], id)
                })
              } else {
                // Nothing was issued: per-shard order still follows everything issued before.
                const fallback = allocateIds(source, shards)
                fallback.forEach((id, i) => {
                  note(id, shards[i]!)
                })
              }
              time.clock.now += seed % 50
            }
          } finally {
            source.close()
          }
        },
      ),
      { seed: 20_261_129, numRuns: 60 },
    )
  })

  it('many concurrent batches of leased sources on a real clock: all distinct', async () => {
    const layoutWithWorkers = (await import('../src')).defineLayout({
      name: 'ascending-workers',
      epoch: '2025-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      workerBits: 4,
      sequenceBits: 6,
    })
    const sharding = defineSharding({ layout: layoutWithWorkers, logicalShards: 64 })
    const registry = new MemoryLeaseRegistry()
    const sources = await Promise.all(
      Array.from({ length: 4 }, () => LeasedSource.start({ sharding, registry })),
    )
    const all: bigint[] = []
    await Promise.all(
      Array.from({ length: 24 }, async (_, caller) => {
        const source = sources[caller % sources.length]!
        for (let round = 0; round < 10; round++) {
          await new Promise((resolve) => setTimeout(resolve, (caller * 7 + round * 3) % 11))
          const shards = shardsInRandomOrder(
            50 + ((caller * 31 + round) % 200),
            64,
            caller * 100 + round,
          )
          const ids =
            round % 3 === 2
              ? source.nextIds(shards[0]!, shards.length)
              : allocateAscending(source, shards)
          if (round % 3 !== 2) {
            // Ascending or, without room on a slow machine, per-shard order: each on its row's shard.
            expect(ids.map((id) => sharding.shardOfId(id))).toEqual(shards)
          }
          all.push(...ids)
        }
      }),
    )
    expect(new Set(all).size).toBe(all.length)
    await Promise.all(sources.map((source) => source.close()))
  })
})
