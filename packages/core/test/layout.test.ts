import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  defineLayout,
  discord,
  InvalidArgumentError,
  InvalidIdError,
  InvalidLayoutError,
  instagram,
  ShardOutOfRangeError,
  sonyflake,
  TimeExhaustedError,
  twitter,
  UnsafeNumberError,
} from '../src'

const base = { epoch: '2025-01-01T00:00:00Z', timeBits: 41, shardBits: 13, sequenceBits: 10 }

describe('defineLayout', () => {
  it.each([
    [{ timeBits: 0 }, /timeBits must be an integer from 1/],
    [{ shardBits: -1 }, /shardBits must be an integer from 1/],
    [{ sequenceBits: 2.5 }, /sequenceBits must be an integer/],
    [{ workerBits: 40 }, /workerBits must be an integer from 0 to 31/],
    [{ timeBits: 42, workerBits: 1 }, /add up to 66 bits/],
    [{ epoch: 'not a date' }, /not a valid instant/],
    [{ epoch: Date.now() + 60_000 }, /lies in the future/],
    [{ timeUnitMs: 0 }, /timeUnitMs must be a positive integer/],
    [{ order: ['time', 'shard', 'shard', 'sequence'] }, /order must name each/],
    [
      { timeBits: 40, shardBits: 14, order: ['shard', 'time', 'worker', 'sequence'] },
      /highest field \(shard\) holds the sign bit/,
    ],
  ])('refuses %o with a clear InvalidLayoutError', (override, message) => {
    expect(() =>
      defineLayout({ ...base, ...override } as Parameters<typeof defineLayout>[0]),
    ).toThrow(InvalidLayoutError)
    expect(() =>
      defineLayout({ ...base, ...override } as Parameters<typeof defineLayout>[0]),
    ).toThrow(message)
  })

  it('reports capacity, the end of the time field and the sign-bit date', () => {
    const layout = defineLayout(base)
    expect(layout.capacityPerMs).toBe(1024)
    expect(layout.shardCount).toBe(8192)
    expect(layout.timeEndsAt.getTime()).toBe(Date.parse(base.epoch) + 2 ** 41)
    expect(layout.negativeFrom?.getTime()).toBe(Date.parse(base.epoch) + 2 ** 40)
    expect(layout.negativeFrom?.toISOString().slice(0, 10)).toBe('2059-11-04')
    const narrow = defineLayout({ ...base, timeBits: 40 })
    expect(narrow.negativeFrom).toBeUndefined()
  })

  it('describes the presets', () => {
    expect(instagram.toJSON()).toMatchObject({
      epoch: 1314220021721,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    expect(instagram.negativeFrom?.toISOString().slice(0, 10)).toBe('2046-06-27')
    expect(twitter.negativeFrom).toBeUndefined()
    expect(discord.negativeFrom?.toISOString().slice(0, 10)).toBe('2084-09-06')
    expect(sonyflake.capacityPerMs).toBe(25.6)
    expect(sonyflake.timeEndsAt.getUTCFullYear()).toBe(2188)
  })
})

describe('compose and decompose', () => {
  it('round-trips every valid combination of parts (property)', () => {
    const layout = defineLayout({ ...base, workerBits: 0 })
    const now = Date.now()
    fc.assert(
      fc.property(
        fc.integer({ min: layout.epoch, max: now }),
        fc.integer({ min: 0, max: layout.shardCount - 1 }),
        fc.integer({ min: 0, max: layout.maxSequence }),
        (timestamp, shard, sequence) => {
          const id = layout.compose({ timestamp, shard, sequence })
          const parts = layout.decompose(id)
          expect(parts).toMatchObject({ timestampMs: timestamp, shard, sequence, worker: 0 })
          expect(layout.decompose(id.toString()).id).toBe(id)
        },
      ),
    )
  })

  it('orders IDs by time first (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: instagram.epoch, max: Date.now() }),
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 8191 }),
        fc.integer({ min: 0, max: 8191 }),
        fc.integer({ min: 0, max: 1023 }),
        fc.integer({ min: 0, max: 1023 }),
        (t, gap, shardA, shardB, seqA, seqB) => {
          const earlier = instagram.compose({ timestamp: t, shard: shardA, sequence: seqA })
          const later = instagram.compose({ timestamp: t + gap, shard: shardB, sequence: seqB })
          expect(later > earlier).toBe(true)
        },
      ),
    )
  })

  it('round-trips layouts with a worker field and other field orders (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 39 - 1 }),
        fc.integer({ min: 0, max: 255 }),
        fc.integer({ min: 0, max: 65_535 }),
        (time, sequence, worker) => {
          const timestamp = sonyflake.epoch + time * 10
          const id = sonyflake.compose({ timestamp, shard: 0, sequence, worker })
          expect(sonyflake.decompose(id)).toMatchObject({ time, sequence, worker, shard: 0 })
        },
      ),
    )
  })

  it('reads the signed spelling PostgreSQL returns once bit 63 is set', () => {
    const signed = defineLayout({
      epoch: 0,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
      allowSignBit: true,
    })
    const timestamp = 2 ** 40 + 12_345
    const id = signed.compose({ timestamp, shard: 77, sequence: 3 })
    expect(id < 0n).toBe(true)
    const unsigned = id + 2n ** 64n
    for (const spelling of [id, id.toString(), unsigned, unsigned.toString()]) {
      expect(signed.decompose(spelling)).toMatchObject({
        timestampMs: timestamp,
        shard: 77,
        sequence: 3,
        id,
      })
    }
    expect(signed.toUnsigned(id)).toBe(unsigned)
    expect(signed.toSigned(unsigned)).toBe(id)
  })

  it('refuses to compose at the sign bit without opt-in, before the epoch, and out of range', () => {
    const layout = defineLayout({ ...base })
    expect(() =>
      layout.compose({ timestamp: layout.negativeFrom!, shard: 0, sequence: 0 }),
    ).toThrow(TimeExhaustedError)
    expect(() => layout.compose({ timestamp: layout.epoch - 1, shard: 0, sequence: 0 })).toThrow(
      TimeExhaustedError,
    )
    expect(() => layout.compose({ timestamp: Date.now(), shard: 8192, sequence: 0 })).toThrow(
      ShardOutOfRangeError,
    )
    expect(() => layout.compose({ timestamp: Date.now(), shard: 0, sequence: 1024 })).toThrow(
      InvalidArgumentError,
    )
  })

  it('gives the sign bit to another field than time only on request, and then never stops at it', () => {
    const options = {
      ...base,
      timeBits: 40,
      shardBits: 14,
      order: ['shard', 'time', 'worker', 'sequence'] as const,
    }
    const layout = defineLayout({ ...options, allowSignBit: true })
    expect(layout.negativeFrom).toBeUndefined()
    expect(layout.timeLimit).toBe(2 ** 40)
    expect(layout.compose({ timestamp: Date.now(), shard: 2 ** 13, sequence: 0 }) < 0n).toBe(true)
    expect(defineLayout({ ...options, decodeOnly: true }).decodeOnly).toBe(true)
  })

  it('refuses values that are not IDs of the layout', () => {
    expect(() => instagram.decompose('12a')).toThrow(InvalidIdError)
    expect(() => instagram.decompose(String(2n ** 64n))).toThrow(InvalidIdError)
    expect(() => twitter.decompose(String(2n ** 63n))).toThrow(/more than 63 bits/)
    expect(() => instagram.decompose(-1n - 2n ** 63n)).toThrow(InvalidIdError)
  })

  it('accepts a safe integer number at run time and refuses an unsafe one', () => {
    // A JavaScript caller (no type checker) passing numbers:
    const shardOfUntyped = (value: number) => Reflect.apply(instagram.shardOf, instagram, [value])
    expect(shardOfUntyped(1387263000905)).toBe(instagram.shardOf(1387263000905n))
    expect(() => shardOfUntyped(2 ** 60)).toThrow(UnsafeNumberError)
  })

  it('reads the shard decompose reads, and refuses what it refuses, for any 64-bit value (property)', () => {
    const narrow = defineLayout({ ...base, timeBits: 27 }) // 50 bits
    const shardFirst = defineLayout({
      ...base,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
      order: ['shard', 'time', 'worker', 'sequence'],
      allowSignBit: true,
    })
    const outcome = (read: () => number) => {
      try {
        return read()
      } catch (error) {
        return (error as Error).constructor.name
      }
    }
    // The shard field ending at bit 31 (read from a digit string in 32-bit integers) and at 32.
    const endsAt31 = defineLayout({ ...base, timeBits: 33, shardBits: 21, sequenceBits: 10 })
    const endsAt32 = defineLayout({ ...base, timeBits: 32, shardBits: 22, sequenceBits: 10 })
    const edges = [0n, 1n, 2n ** 31n, 2n ** 50n - 1n, 2n ** 50n, 2n ** 63n - 1n, 2n ** 63n]
    const values = fc.oneof(
      fc.bigInt({ min: -(2n ** 63n) - 2n, max: 2n ** 64n + 2n }),
      fc.constantFrom(...edges, 2n ** 64n - 1n, ...edges.map((edge) => -edge)),
    )
    // How a driver, a form or a URL may spell it: plain, zero-padded, with spaces or a sign.
    const spellings = fc.constantFrom(
      (text: string) => text,
      (text: string) => `0${text}`,
      (text: string) => `000${text}`,
      (text: string) => ` ${text}`,
      (text: string) => `${text} `,
      (text: string) => `+${text}`,
      (text: string) => `${text}0`,
      (text: string) => `${text.slice(0, -1)}:`, // the characters either side of the digits
      (text: string) => `/${text}`,
      () => '',
    )
    for (const layout of [instagram, twitter, narrow, shardFirst, endsAt31, endsAt32]) {
      fc.assert(
        fc.property(values, spellings, (value, spell) => {
          const expected = outcome(() => layout.decompose(value).shard)
          expect(outcome(() => layout.shardOf(value))).toBe(expected)
          expect(outcome(() => layout.shardOf(value.toString()))).toBe(expected)
          const text = spell(value.toString())
          expect(outcome(() => layout.shardOf(text))).toBe(
            outcome(() => layout.decompose(text).shard),
          )
        }),
        { numRuns: 2000 },
      )
    }
  })
})

describe('idRange', () => {
  it('brackets exactly the IDs of a time range (property)', () => {
    const now = Date.now()
    fc.assert(
      fc.property(
        // from + offset never lies before the epoch, where no ID can be composed at all
        fc.integer({ min: instagram.epoch + 3, max: now - 10_000 }),
        fc.integer({ min: 0, max: 5_000 }),
        fc.integer({ min: -3, max: 5_003 }),
        fc.integer({ min: 0, max: 8191 }),
        fc.integer({ min: 0, max: 1023 }),
        (from, length, offset, shard, sequence) => {
          const { min, max } = instagram.idRange(from, from + length)
          const id = instagram.compose({ timestamp: from + offset, shard, sequence })
          const inside = offset >= 0 && offset <= length
          expect(id >= min && id <= max).toBe(inside)
        },
      ),
    )
  })
})

describe('checkGenerating and the field helpers', () => {
  const small = defineLayout({
    name: 'small',
    epoch: '2025-01-01T00:00:00Z',
    timeBits: 20, // 2^20 ms: about 17.5 minutes
    shardBits: 4,
    sequenceBits: 8,
  })
  const endsAt = small.epoch + 2 ** 20

  it('returns the ms left while the layout can make IDs, at an injected instant', () => {
    expect(small.checkGenerating(small.epoch)).toBe(2 ** 20)
    expect(small.checkGenerating(endsAt - 1)).toBe(1)
    expect(small.checkGenerating(endsAt - 1_001, 1_000)).toBe(1_001)
    expect(instagram.checkGenerating(Date.UTC(2026, 0, 1))).toBeGreaterThan(0)
  })

  it('throws TimeExhaustedError once the time field is used up or runs out within the margin', () => {
    expect(() => small.checkGenerating(endsAt)).toThrow(TimeExhaustedError)
    expect(() => small.checkGenerating(endsAt + 60_000)).toThrow(/ran out/)
    expect(() => small.checkGenerating(endsAt - 1_000, 1_000)).toThrow(TimeExhaustedError)
    expect(() => small.checkGenerating(endsAt - 1_000, 1_000)).toThrow(/within 1000 ms/)
    // Instagram's layout stops at bit 63, not at the end of its 41 bits.
    const signBit = instagram.negativeFrom!.getTime()
    expect(() => instagram.checkGenerating(signBit)).toThrow(TimeExhaustedError)
    expect(instagram.checkGenerating(signBit - 1)).toBe(1)
  })

  it('throws InvalidLayoutError for decode-only layouts, whatever the time', () => {
    expect(() => twitter.checkGenerating(Date.UTC(2026, 0, 1))).toThrow(InvalidLayoutError)
  })

  it('timeAt, composeTime, checkTime and checkShard agree with compose', () => {
    const at = small.epoch + 12_345
    expect(small.timeAt(at)).toBe(12_345)
    expect(() => small.timeAt(small.epoch - 1)).toThrow(TimeExhaustedError)
    expect(small.timeAt(small.epoch - 1, true)).toBe(-1)
    expect(small.composeTime(12_345, 3, 0, 7)).toBe(
      small.compose({ timestamp: at, shard: 3, sequence: 7 }),
    )
    expect(small.composeTime(12_345, 3, 0, 7)).toBe(
      (12_345n << small.shifts.time) | (3n << small.shifts.shard) | 7n,
    )
    expect(() => small.checkTime(2 ** 20)).toThrow(TimeExhaustedError)
    small.checkTime(2 ** 20 - 1)
    expect(() => small.checkShard(16)).toThrow(ShardOutOfRangeError)
    expect(() => small.composeTime(0, 0, 0, 256)).toThrow(InvalidArgumentError)
    expect(small.timeLimit).toBe(2 ** 20)
  })
})
