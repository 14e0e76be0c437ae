import { describe, expect, it } from 'vitest'
import {
  ClockMovedBackwardsError,
  ConfigurationError,
  defineLayout,
  defineSharding,
  InProcessSource,
  InvalidArgumentError,
  InvalidLayoutError,
  instagram,
  MAX_IDS_PER_CALL,
  ShardConflictError,
  ShardflakeError,
  ShardOutOfRangeError,
  ShardOverloadedError,
  TimeExhaustedError,
  twitter,
} from '../src'
import { fakeClock, openSource, sharding } from './support'

describe('InProcessSource', () => {
  it('borrows the next ms past 1024 IDs in one ms instead of wrapping', () => {
    const { clock, options } = fakeClock(instagram.epoch + 1_000_000)
    const source = openSource({ shards: 'all', ...options })
    const ids = source.nextIds(7, 5_000) // the clock never moves on its own
    expect(new Set(ids).size).toBe(5_000)
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
    const times = new Set(ids.map((id) => instagram.decompose(id).time))
    expect(times.size).toBe(5) // 5,000 IDs need 5 ms of sequence space: 1024 per ms
    expect(clock.slept).toBe(0) // 4 ms ahead is within the default 10 ms drift: no waiting
  })

  it('waits for the clock once it runs maxDriftMs ahead, and never exceeds the drift', () => {
    const { clock, options } = fakeClock(instagram.epoch + 5_000)
    const source = openSource({ shards: 'all', maxDriftMs: 3, ...options })
    const ids = source.nextIds(1, 1024 * 20)
    expect(new Set(ids).size).toBe(ids.length)
    const last = instagram.decompose(ids.at(-1)!)
    expect(last.timestampMs - clock.now).toBeLessThanOrEqual(3)
    expect(clock.slept).toBeGreaterThanOrEqual(16)
  })

  it('never repeats an ID when the clock steps back, and stays ascending', () => {
    const { clock, options } = fakeClock(instagram.epoch + 10_000_000)
    const source = openSource({ shards: 'all', ...options })
    const seen = new Set<bigint>()
    let previous = -1n
    const draw = (n: number) => {
      for (let i = 0; i < n; i++) {
        const id = source.nextId(3)
        expect(seen.has(id)).toBe(false)
        expect(id > previous).toBe(true)
        seen.add(id)
        previous = id
      }
    }
    for (let ms = 0; ms < 30; ms++) {
      draw(700)
      clock.now += 1
    }
    clock.now -= 30 // the 30 ms step back that made @sapphire/snowflake repeat 18,463 IDs
    for (let ms = 0; ms < 30; ms++) {
      draw(700)
      clock.now += 1
    }
    expect(seen.size).toBe(60 * 700)
  })

  it('throws ClockMovedBackwardsError when the clock stepped back past maxWaitMs, issuing nothing, then recovers', () => {
    const { clock, options } = fakeClock(instagram.epoch + 50_000)
    const source = openSource({
      shards: 'all',
      maxWaitMs: 50,
      ...options,
      sleep: () => {}, // a clock that does not move while we wait
    })
    const before = source.nextIds(0, 1024) // uses up the ms
    clock.now -= 1_000
    const error = catchError(() => source.nextId(0))
    expect(error).toBeInstanceOf(ClockMovedBackwardsError)
    expect((error as ShardflakeError).code).toBe('CLOCK_MOVED_BACKWARDS')
    clock.now += 1_001
    const after = source.nextId(0)
    expect(after > before.at(-1)!).toBe(true)
  })

  it('throws ShardOverloadedError, not a clock error, when a burst outruns the drift on a steady clock', () => {
    const { clock, options } = fakeClock(instagram.epoch + 70_000)
    const source = openSource({
      shards: 'all',
      maxDriftMs: 3,
      maxWaitMs: 2,
      ...options,
      sleep: () => {}, // the clock is steady: it never goes back, it just does not move here
    })
    const error = catchError(() => source.nextIds(9, 1024 * 10))
    expect(error).toBeInstanceOf(ShardOverloadedError)
    expect(error).not.toBeInstanceOf(ClockMovedBackwardsError)
    expect((error as ShardflakeError).code).toBe('SHARD_OVERLOADED')
    expect((error as Error).message).not.toMatch(/fix the clock|clock (moved|went|stepped) back/i)
    // Once the clock has caught up, the shard serves again, above everything it used.
    clock.now += 10
    const [next] = source.nextIds(9, 1)
    expect(instagram.decompose(next!).timestampMs).toBeGreaterThan(clock.now - 11)
  })

  it('refuses nextIds(0) and nextIds(2 ** 31) with InvalidArgumentError before reading the clock', () => {
    const { clock, options } = fakeClock(instagram.epoch + 80_000)
    const source = openSource({ shards: 'all', ...options })
    for (const count of [0, 2 ** 31, MAX_IDS_PER_CALL + 1, -1, 1.5, Number.NaN]) {
      expect(() => source.nextIds(0, count)).toThrow(InvalidArgumentError)
    }
    expect(clock.reads).toBe(0)
    expect(source.nextIds(0, 3)).toHaveLength(3)
  })

  it('refuses a second source for a shard of this process with ShardConflictError', () => {
    const first = openSource({ shards: { from: 0, to: 9 } })
    expect(() => new InProcessSource({ sharding, shards: [9, 10] })).toThrow(ShardConflictError)
    expect(() => new InProcessSource({ sharding, shards: 'all' })).toThrow(ShardConflictError)
    // Nothing of a refused source is claimed: shard 10 is still free.
    const neighbour = openSource({ shards: [10, 11] })
    expect(sharding.shardOfId(neighbour.nextId(10))).toBe(10)
    expect(sharding.shardOfId(first.nextId(9))).toBe(9)
  })

  it('lets a new source take the shards after close(), starting after the old last ID', () => {
    const { clock, options } = fakeClock(instagram.epoch + 90_000)
    const first = new InProcessSource({ sharding, shards: [4], ...options })
    const old = first.nextIds(4, 5_000) // borrows 4 ms ahead of the clock, which stands still
    first.close()
    first.close() // twice is fine
    expect(() => first.nextId(4)).toThrow(ConfigurationError)
    const second = openSource({ shards: [4], ...options })
    const fresh = second.nextIds(4, 2_000)
    expect(fresh[0]! > old.at(-1)!).toBe(true)
    expect(new Set([...old, ...fresh]).size).toBe(7_000)
    expect(clock.now).toBe(instagram.epoch + 90_000)
  })

  it('lets two sources share a shard with different worker ids', () => {
    const layout = defineLayout({
      epoch: 1_700_000_000_000,
      timeBits: 41,
      shardBits: 8,
      workerBits: 5,
      sequenceBits: 10,
    })
    const workers = defineSharding({ layout, logicalShards: 256 })
    const a = openSource({ sharding: workers, worker: 1 })
    const b = openSource({ sharding: workers, worker: 2 })
    expect(() => new InProcessSource({ sharding: workers, worker: 1, shards: [3] })).toThrow(
      ShardConflictError,
    )
    expect(layout.decompose(a.nextId(3)).worker).toBe(1)
    expect(layout.decompose(b.nextId(3)).worker).toBe(2)
  })

  it('refuses a clock that returns no number instead of issuing IDs at time 0', () => {
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const source = new InProcessSource({ sharding, shards: 'all', clock: () => value })
      try {
        expect(() => source.nextIds(1341, 3)).toThrow(ConfigurationError)
        expect(() => source.nextId(1341)).toThrow(/returned (NaN|Infinity)/)
      } finally {
        source.close()
      }
    }
  })

  it('keeps each shard apart and encodes the shard', () => {
    const source = openSource({ shards: [1, 2] })
    const a = source.nextIds(1, 100)
    const b = source.nextIds(2, 100)
    expect(new Set([...a, ...b]).size).toBe(200)
    expect(a.every((id) => sharding.shardOfId(id) === 1)).toBe(true)
    expect(b.every((id) => sharding.shardOfId(id) === 2)).toBe(true)
    expect(() => source.nextId(3)).toThrow(ShardOutOfRangeError)
    expect(() => source.nextId(2000)).toThrow(ShardOutOfRangeError)
  })

  it('encodes the worker and validates it without masking', () => {
    const layout = defineLayout({
      epoch: 1_700_000_000_000,
      timeBits: 41,
      shardBits: 8,
      workerBits: 5,
      sequenceBits: 10,
    })
    const workers = defineSharding({ layout, logicalShards: 256 })
    const source = openSource({ sharding: workers, worker: 17 })
    expect(layout.decompose(source.nextId(200)).worker).toBe(17)
    expect(() => new InProcessSource({ sharding: workers, worker: 32 })).toThrow(ConfigurationError)
    expect(() => new InProcessSource({ sharding: workers })).toThrow(ConfigurationError)
  })

  it('requires the sharding, and an explicit statement of shard ownership for layouts without worker bits', () => {
    expect(() => new InProcessSource({} as never)).toThrow(ConfigurationError)
    expect(() => new InProcessSource({ sharding })).toThrow(ConfigurationError)
    expect(() => new InProcessSource({ sharding, worker: 3, shards: 'all' })).toThrow(
      ConfigurationError,
    )
    expect(() => new InProcessSource({ sharding, shards: { from: 0, to: 4_000_000_000 } })).toThrow(
      ShardOutOfRangeError,
    )
    expect(() => new InProcessSource({ sharding, shards: 'all', maxWaitMs: 1e14 })).toThrow(
      InvalidArgumentError,
    )
  })

  it('refuses decode-only layouts', () => {
    const decodeOnly = defineSharding({ layout: twitter, logicalShards: 1 })
    expect(() => new InProcessSource({ sharding: decodeOnly, worker: 1 })).toThrow(
      InvalidLayoutError,
    )
  })

  it('stops at the sign bit unless allowed', () => {
    const negativeFrom = instagram.negativeFrom!.getTime()
    const { options } = fakeClock(negativeFrom - 1)
    const source = new InProcessSource({ sharding, shards: [4], ...options })
    source.nextIds(4, 1024)
    expect(() => source.nextId(4)).toThrow(TimeExhaustedError)
    source.close() // the signed layout below makes IDs in the same space: one source at a time

    const signed = defineLayout({ ...instagramOptions(), allowSignBit: true })
    const open = openSource({
      sharding: defineSharding({ layout: signed, logicalShards: 2000 }),
      shards: [4],
      ...fakeClock(negativeFrom).options,
    })
    const id = open.nextId(4)
    expect(id < 0n).toBe(true)
    expect(signed.decompose(id).timestampMs).toBe(negativeFrom)
  })
})

function instagramOptions() {
  return { epoch: instagram.epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 }
}

function catchError(action: () => unknown): unknown {
  try {
    action()
  } catch (error) {
    expect(error).toBeInstanceOf(ShardflakeError)
    return error
  }
  throw new Error('Expected an error, got none.')
}
