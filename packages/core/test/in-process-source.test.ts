import { describe, expect, it } from 'vitest'
import {
  ClockMovedBackwardsError,
  ConfigurationError,
  defineLayout,
  InProcessSource,
  InvalidLayoutError,
  instagram,
  ShardOutOfRangeError,
  TimeExhaustedError,
  twitter,
} from '../src'

/** A clock that moves only when told to; sleeping advances it. */
function fakeClock(startMs: number) {
  const clock = { now: startMs, slept: 0 }
  return {
    clock,
    options: {
      clock: () => clock.now,
      sleep: (ms: number) => {
        clock.now += ms
        clock.slept += ms
      },
    },
  }
}

describe('InProcessSource', () => {
  it('borrows the next ms past 1024 IDs in one ms instead of wrapping', () => {
    const { clock, options } = fakeClock(instagram.epoch + 1_000_000)
    const source = new InProcessSource({ layout: instagram, shards: 'all', ...options })
    const ids = source.nextIds(7, 5_000) // the clock never moves on its own
    expect(new Set(ids).size).toBe(5_000)
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
    const times = new Set(ids.map((id) => instagram.decompose(id).time))
    expect(times.size).toBe(5) // 5,000 IDs need 5 ms of sequence space: 1024 per ms
    expect(clock.slept).toBe(0) // 4 ms ahead is within the default 10 ms drift: no waiting
  })

  it('waits for the clock once it runs maxDriftMs ahead, and never exceeds the drift', () => {
    const { clock, options } = fakeClock(instagram.epoch + 5_000)
    const source = new InProcessSource({
      layout: instagram,
      shards: 'all',
      maxDriftMs: 3,
      ...options,
    })
    const ids = source.nextIds(1, 1024 * 20)
    expect(new Set(ids).size).toBe(ids.length)
    const last = instagram.decompose(ids.at(-1)!)
    expect(last.timestampMs - clock.now).toBeLessThanOrEqual(3)
    expect(clock.slept).toBeGreaterThanOrEqual(16)
  })

  it('never repeats an ID when the clock steps back, and stays ascending', () => {
    const { clock, options } = fakeClock(instagram.epoch + 10_000_000)
    const source = new InProcessSource({ layout: instagram, shards: 'all', ...options })
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

  it('throws ClockMovedBackwardsError past maxWaitMs, issuing nothing, then recovers', () => {
    const { clock, options } = fakeClock(instagram.epoch + 50_000)
    const source = new InProcessSource({
      layout: instagram,
      shards: 'all',
      maxWaitMs: 50,
      ...options,
      sleep: () => {}, // a clock that does not move while we wait
    })
    const before = source.nextIds(0, 1024) // uses up the ms
    clock.now -= 1_000
    expect(() => source.nextId(0)).toThrow(ClockMovedBackwardsError)
    clock.now += 1_001
    const after = source.nextId(0)
    expect(after > before.at(-1)!).toBe(true)
  })

  it('refuses a clock that returns no number instead of issuing IDs at time 0', () => {
    for (const value of [Number.NaN, Number.POSITIVE_INFINITY]) {
      const source = new InProcessSource({ layout: instagram, shards: 'all', clock: () => value })
      expect(() => source.nextIds(1341, 3)).toThrow(ConfigurationError)
      expect(() => source.nextId(1341)).toThrow(/returned (NaN|Infinity)/)
    }
  })

  it('keeps each shard apart and encodes the shard', () => {
    const source = new InProcessSource({ layout: instagram, shards: [1, 2] })
    const a = source.nextIds(1, 100)
    const b = source.nextIds(2, 100)
    expect(new Set([...a, ...b]).size).toBe(200)
    expect(a.every((id) => instagram.shardOf(id) === 1)).toBe(true)
    expect(b.every((id) => instagram.shardOf(id) === 2)).toBe(true)
    expect(() => source.nextId(3)).toThrow(ShardOutOfRangeError)
  })

  it('encodes the worker and validates it without masking', () => {
    const layout = defineLayout({
      epoch: 1_700_000_000_000,
      timeBits: 41,
      shardBits: 8,
      workerBits: 5,
      sequenceBits: 10,
    })
    const source = new InProcessSource({ layout, worker: 17 })
    expect(layout.decompose(source.nextId(200)).worker).toBe(17)
    expect(() => new InProcessSource({ layout, worker: 32 })).toThrow(ConfigurationError)
    expect(() => new InProcessSource({ layout })).toThrow(ConfigurationError)
  })

  it('requires an explicit statement of shard ownership for layouts without worker bits', () => {
    expect(() => new InProcessSource({ layout: instagram })).toThrow(ConfigurationError)
    expect(() => new InProcessSource({ layout: instagram, worker: 3, shards: 'all' })).toThrow(
      ConfigurationError,
    )
  })

  it('refuses decode-only layouts', () => {
    expect(() => new InProcessSource({ layout: twitter, worker: 1 })).toThrow(InvalidLayoutError)
  })

  it('stops at the sign bit unless allowed', () => {
    const negativeFrom = instagram.negativeFrom!.getTime()
    const { options } = fakeClock(negativeFrom - 1)
    const source = new InProcessSource({ layout: instagram, shards: 'all', ...options })
    source.nextIds(4, 1024)
    expect(() => source.nextId(4)).toThrow(TimeExhaustedError)

    const signed = defineLayout({ ...instagramOptions(), allowSignBit: true })
    const open = new InProcessSource({
      layout: signed,
      shards: 'all',
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
