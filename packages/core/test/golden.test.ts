/**
 * Exact IDs for known parts: a change of bit order, shift or epoch breaks these. The Instagram
 * vectors follow "Sharding & IDs at Instagram": 41 bits of ms since the epoch, 13 bits of shard,
 * 10 bits of sequence, worked out by hand as time << 23 | shard << 10 | sequence.
 */
import { describe, expect, it } from 'vitest'
import { defineLayout, instagram } from '../src'

const EPOCH = 1314220021721

describe('golden vectors', () => {
  it.each([
    // ms after the epoch, shard, sequence → ID
    [0, 0, 0, 0n],
    [1, 0, 0, 8388608n],
    [0, 8191, 1023, 8388607n],
    [1387263000, 1341, 905, 11637205501278089n],
    [2 ** 40 - 1, 8191, 1023, 9223372036854775807n],
  ])('instagram: %d ms, shard %d, sequence %d → %s', (ms, shard, sequence, id) => {
    expect(instagram.epoch).toBe(EPOCH)
    expect(instagram.compose({ timestamp: EPOCH + ms, shard, sequence })).toBe(id)
    expect(instagram.decompose(id)).toMatchObject({ time: ms, shard, sequence, worker: 0 })
  })

  it('instagram: the first ID past bit 63 decodes from both spellings, and is not made', () => {
    for (const spelling of ['-9223372036854775808', '9223372036854775808']) {
      expect(instagram.decompose(spelling)).toMatchObject({
        id: -9223372036854775808n,
        time: 2 ** 40,
        shard: 0,
        sequence: 0,
      })
    }
    expect(() => instagram.compose({ timestamp: EPOCH + 2 ** 40, shard: 0, sequence: 0 })).toThrow(
      expect.objectContaining({ code: 'TIME_EXHAUSTED' }),
    )
  })

  it('the default field order (time, shard, worker, sequence) with worker bits', () => {
    const layout = defineLayout({
      epoch: '2025-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      workerBits: 4,
      sequenceBits: 6,
    })
    expect(layout.order).toEqual(['time', 'shard', 'worker', 'sequence'])
    const at = Date.UTC(2025, 0, 1)
    expect(layout.compose({ timestamp: at + 1000, shard: 5, worker: 3, sequence: 7 })).toBe(
      8388613319n,
    )
    expect(
      layout.compose({ timestamp: at + 2 ** 40 - 1, shard: 8191, worker: 15, sequence: 63 }),
    ).toBe(9223372036854775807n)
    expect(layout.decompose(8388613319n)).toMatchObject({
      time: 1000,
      shard: 5,
      worker: 3,
      sequence: 7,
    })
  })
})

describe('inputs that used to fail untyped or wrongly', () => {
  const base = { timeBits: 41, shardBits: 13, sequenceBits: 10 }

  it('idRange clamps to the last time the layout can make, and never returns max < min', () => {
    const range = instagram.idRange(new Date('2026-01-01'), new Date('2047-01-01'))
    expect(range.min).toBeLessThan(range.max)
    expect(range.max).toBe(9223372036854775807n)
    expect(() => instagram.idRange(1e20, 1e21)).toThrow(
      expect.objectContaining({
        code: 'INVALID_ARGUMENT',
        message: expect.stringMatching(/lies past the last time/),
      }),
    )
    const signed = defineLayout({ ...base, epoch: 0, allowSignBit: true })
    expect(() => signed.idRange(0, 2 ** 40 + 5)).toThrow(/split at layout.negativeFrom/)
    expect(signed.idRange(2 ** 40, 2 ** 40 + 5).min).toBe(-9223372036854775808n)
  })

  it('epochs are ISO-8601, a Date or ms; anything else is INVALID_LAYOUT naming the epoch', () => {
    for (const epoch of ['hello 2020', 'x 1', 'Jan 1 2020', '2020-02-30']) {
      expect(() => defineLayout({ ...base, epoch }), epoch).toThrow(
        expect.objectContaining({
          code: 'INVALID_LAYOUT',
          message: expect.stringMatching(/epoch/),
        }),
      )
    }
    expect(defineLayout({ ...base, epoch: '2020-01-01' }).epoch).toBe(Date.UTC(2020, 0, 1))
    expect(defineLayout({ ...base, epoch: '2020-01-01T02:00:00+02:00' }).epoch).toBe(
      Date.UTC(2020, 0, 1),
    )
  })

  it('missing or malformed layout options are INVALID_LAYOUT', () => {
    for (const options of [undefined, null, 5, { ...base, epoch: 0, order: 'time' }]) {
      expect(() => defineLayout(options as never)).toThrow(
        expect.objectContaining({ code: 'INVALID_LAYOUT' }),
      )
    }
    // Every instant must fit a Date: 60 bits of ms from 1970 do not.
    expect(() => defineLayout({ epoch: 0, timeBits: 60, shardBits: 2, sequenceBits: 2 })).toThrow(
      /past the last instant a Date can hold/,
    )
    expect(() => instagram.compose(undefined as never)).toThrow(
      expect.objectContaining({ code: 'INVALID_ARGUMENT' }),
    )
  })
})
