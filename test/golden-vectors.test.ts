/**
 * Vectors taken from the seed articles (shared/seeds): if one of these changes, IDs made by
 * shardflake no longer match the scheme users were promised.
 */
import { defineLayout, integerShard } from '@shardflake/core'
import { describe, expect, it } from 'vitest'

describe('golden vectors from the seed articles', () => {
  it("Instagram's worked example (seeds 000 and 003): 1387263000 ms, user 31341, sequence 5001", () => {
    const layout = defineLayout({
      epoch: '2011-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const shard = integerShard(31341, 2000)
    expect(shard).toBe(1341)
    const id = layout.compose({
      timestamp: layout.epoch + 1387263000,
      shard,
      sequence: 5001 % 1024,
    })
    // 1387263000 << 23 | 1341 << 10 | 905, worked out by hand from the article's three steps
    expect(id).toBe(11637205501278089n)
    expect(layout.decompose(id)).toMatchObject({ time: 1387263000, shard: 1341, sequence: 905 })
  })

  it("seed 004's values around the sign bit: 2046-11-01 positive, 2046-12-01 negative", () => {
    const layout = defineLayout({
      epoch: 1325376000000,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
      allowSignBit: true,
    })
    const november = layout.compose({
      timestamp: Date.UTC(2046, 10, 1),
      shard: 5,
      sequence: 112345 % 1024,
    })
    const december = layout.compose({
      timestamp: Date.UTC(2046, 11, 1),
      shard: 5,
      sequence: 112345 % 1024,
    })
    // The NOTICE lines PostgreSQL printed in the article:
    expect(november).toBe(9221321628057605849n)
    expect(december).toBe(-9203679173715945767n)
    expect(layout.decompose('-9203679173715945767')).toMatchObject({
      timestamp: new Date('2046-12-01T00:00:00Z'),
      shard: 5,
      sequence: 729,
    })
    expect(layout.negativeFrom!.getTime()).toBeGreaterThan(Date.UTC(2046, 10, 1))
    expect(layout.negativeFrom!.getTime()).toBeLessThan(Date.UTC(2046, 11, 1))
    const strict = defineLayout({
      epoch: 1325376000000,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    expect(() =>
      strict.compose({ timestamp: Date.UTC(2046, 11, 1), shard: 5, sequence: 0 }),
    ).toThrow(/negative in a signed BIGINT/)
  })

  it('Twitter and Discord snowflakes decode with the decode-only presets', async () => {
    const { discord, twitter } = await import('@shardflake/core')
    // Discord's documented example snowflake 175928847299117063 → 2016-04-30T11:18:25.796Z,
    // internal worker 1, internal process 0, increment 7.
    expect(discord.decompose('175928847299117063')).toMatchObject({
      timestamp: new Date('2016-04-30T11:18:25.796Z'),
      shard: 1,
      worker: 0,
      sequence: 7,
    })
    // Twitter: (ms since 2010-11-04T01:42:54.657Z) << 22.
    const tweet = twitter.compose({
      timestamp: Date.UTC(2020, 0, 1),
      shard: 3,
      worker: 9,
      sequence: 42,
    })
    expect(twitter.decompose(tweet)).toMatchObject({
      timestampMs: Date.UTC(2020, 0, 1),
      shard: 3,
      worker: 9,
      sequence: 42,
    })
  })
})
