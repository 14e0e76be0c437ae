import { instagram } from '@shardflake/core'
import { describe, expect, it } from 'vitest'
import { fakeClock, isAscending, perTick, sharding, testFixture } from './helpers'
import { runTag, sharedRedisUrl } from './redis-servers'

const prefix = `sf:redis:capacity:${runTag}:`
const fixture = testFixture(() => ({ sharding, servers: sharedRedisUrl, keyPrefix: prefix }))
fixture.deleteAfter(() => sharedRedisUrl, prefix)

describe('RedisSource past the per-ms capacity of a shard', () => {
  it('borrows the next milliseconds in one call instead of wrapping the sequence', async () => {
    const clock = fakeClock(Date.now())
    const source = fixture.source({
      keyPrefix: prefix,
      maxDriftMs: 10,
      clock: clock.read,
      sleep: clock.sleep,
    })
    // A fresh shard starts maxDriftMs + 1 ms ahead of the clock (the restart floor): let the
    // clock catch up so the whole drift allowance is free.
    await source.nextId(1)
    clock.now += 11
    clock.slept = 0
    const start = clock.now
    const ids = await source.nextIds(1, 5_000)
    expect(clock.slept).toBe(0)
    expect(new Set(ids).size).toBe(5_000)
    expect(isAscending(ids)).toBe(true)
    const ticks = perTick(instagram, ids)
    expect(ticks.size).toBeGreaterThanOrEqual(5)
    for (const count of ticks.values()) expect(count).toBeLessThanOrEqual(1_024)
    const latest = Math.max(...[...ticks.keys()].map((time) => time + instagram.epoch))
    expect(latest).toBeLessThanOrEqual(start + 10)
  })

  it('serves a batch beyond maxDriftMs of capacity by waiting for the clock, never running ahead', async () => {
    const clock = fakeClock(Date.now() + 60_000)
    const source = fixture.source({
      keyPrefix: prefix,
      maxDriftMs: 10,
      clock: clock.read,
      sleep: clock.sleep,
    })
    const ids = await source.nextIds(2, 60_000)
    expect(new Set(ids).size).toBe(60_000)
    expect(isAscending(ids)).toBe(true)
    expect(clock.slept).toBeGreaterThanOrEqual(40)
    const ticks = perTick(instagram, ids)
    for (const count of ticks.values()) expect(count).toBeLessThanOrEqual(1_024)
    expect(instagram.decompose(ids.at(-1)!).timestampMs).toBeLessThanOrEqual(clock.now + 10)
  })

  it('gives 200,000 distinct IDs to 16 concurrent callers on one shard at real time', async () => {
    const source = fixture.source({
      keyPrefix: `${prefix}default-drift:`,
    })
    // The script stamps IDs with the server's clock (TIME): bound them by that clock, read
    // before and after, never by this machine's.
    const redis = fixture.client(sharedRedisUrl)
    const serverMs = async () => {
      const [seconds, micros] = await redis.time()
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000)
    }
    const begin = await serverMs()
    const callers = Array.from({ length: 16 }, async (_, caller) => {
      const ids: bigint[] = []
      while (ids.length < 12_500) {
        if (caller % 4 === 0) ids.push(await source.nextId(3))
        else ids.push(...(await source.nextIds(3, Math.min(500, 12_500 - ids.length))))
      }
      return ids
    })
    const all = (await Promise.all(callers)).flat()
    const end = await serverMs()
    expect(all).toHaveLength(200_000)
    expect(new Set(all).size).toBe(200_000)
    const ticks = perTick(instagram, all)
    for (const count of ticks.values()) expect(count).toBeLessThanOrEqual(1_024)
    for (const time of ticks.keys()) {
      expect(time + instagram.epoch).toBeGreaterThanOrEqual(begin - 1)
      expect(time + instagram.epoch).toBeLessThanOrEqual(end + 1_001)
    }
  })
})
