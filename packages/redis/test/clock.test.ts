import { ClockMovedBackwardsError, instagram } from '@shardflake/core'
import { Redis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { fakeClock, isAscending, sharding, testFixture } from './helpers'
import { runTag, sharedRedisUrl } from './redis-servers'

const prefix = `sf:redis:clock:${runTag}:`
const fixture = testFixture(() => ({
  sharding,
  servers: sharedRedisUrl,
  keyPrefix: prefix,
  maxDriftMs: 10,
}))
fixture.deleteAfter(() => sharedRedisUrl, prefix)
const open = (clock: ReturnType<typeof fakeClock>, extra: { maxWaitMs?: number } = {}) =>
  fixture.source({ clock: clock.read, sleep: clock.sleep, ...extra })

describe('RedisSource when the server clock steps back', () => {
  it('keeps issuing new, ascending IDs after a step back within maxDriftMs, also for a new process', async () => {
    const clock = fakeClock(Date.now())
    const first = open(clock)
    const before = await first.nextIds(1, 3_000)
    clock.now -= 5
    const after = await first.nextIds(1, 3_000)
    // A second process has no memory of its own: only the state in Redis keeps it apart.
    const other = open(fakeClock(clock.now - 3))
    const fromOther = await other.nextIds(1, 3_000)
    const all = [...before, ...after, ...fromOther]
    expect(new Set(all).size).toBe(9_000)
    expect(isAscending(all)).toBe(true)
    const lastBefore = instagram.decompose(before.at(-1)!).timestampMs
    expect(instagram.decompose(after[0]!).timestampMs).toBeGreaterThanOrEqual(lastBefore)
  })

  it('waits out a step back larger than maxDriftMs when it fits maxWaitMs', async () => {
    const clock = fakeClock(Date.now() + 60_000)
    const source = open(clock)
    const before = await source.nextIds(2, 100)
    const lastTime = instagram.decompose(before.at(-1)!).timestampMs
    clock.now -= 50
    clock.slept = 0
    const after = await source.nextIds(2, 100)
    expect(clock.slept).toBeGreaterThan(0)
    expect(clock.slept).toBeLessThanOrEqual(100)
    expect(new Set([...before, ...after]).size).toBe(200)
    expect(after[0]! > before.at(-1)!).toBe(true)
    expect(instagram.decompose(after[0]!).timestampMs).toBeGreaterThanOrEqual(lastTime)
  })

  it('refuses with ClockMovedBackwardsError, issuing nothing, past maxDriftMs + maxWaitMs', async () => {
    const clock = fakeClock(Date.now() + 120_000)
    const source = open(clock)
    const before = await source.nextIds(3, 500)
    const reader = new Redis(sharedRedisUrl)
    const state = await reader.get(`${prefix}shard:3`)
    clock.now -= 1_000
    const error = await source.nextId(3).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(ClockMovedBackwardsError)
    expect((error as ClockMovedBackwardsError).code).toBe('CLOCK_MOVED_BACKWARDS')
    expect((error as ClockMovedBackwardsError).behindMs).toBeGreaterThanOrEqual(1_000)
    expect(await reader.get(`${prefix}shard:3`)).toBe(state)
    reader.disconnect()
    clock.now += 1_000
    const after = await source.nextIds(3, 500)
    expect(new Set([...before, ...after]).size).toBe(1_000)
    expect(after[0]! > before.at(-1)!).toBe(true)
  })

  it('where the published script (INCRBY % 1024 + the time) repeats IDs after a step back, it does not', async () => {
    // The published generator, with the time it reads injected: a per-shard INCRBY, mod 1024.
    const naive = `local seq = redis.call('INCRBY', KEYS[1], 1) % 1024
return {tonumber(ARGV[1]), seq}`
    const reader = new Redis(sharedRedisUrl)
    const clock = fakeClock(Date.now() + 240_000)
    const naiveIds: bigint[] = []
    const draw = async (count: number) => {
      for (let i = 0; i < count; i++) {
        const [ms, seq] = (await reader.eval(naive, 1, `${prefix}naive`, clock.now)) as number[]
        naiveIds.push(instagram.compose({ timestamp: ms!, shard: 5, sequence: seq! }))
      }
    }
    const source = open(clock)
    const ours: bigint[] = []
    await source.nextId(5) // a fresh shard waits 1 ms first: get that out of the way
    const at = clock.now
    await draw(600)
    ours.push(...(await source.nextIds(5, 600)))
    clock.now = at + 2
    ours.push(...(await source.nextIds(5, 600)))
    clock.now = at // the clock steps back 2 ms, to the instant of the first draw
    await draw(600)
    ours.push(...(await source.nextIds(5, 600)))
    reader.disconnect()
    expect(new Set(naiveIds).size).toBeLessThan(naiveIds.length)
    expect(new Set(ours).size).toBe(ours.length)
  })

  it('with maxWaitMs 0, still starts a fresh shard, and refuses a step back beyond the drift at once', async () => {
    const clock = fakeClock(Date.now() + 300_000)
    const source = open(clock, { maxWaitMs: 0 })
    const before = await source.nextIds(6, 2_000)
    clock.now -= 30
    clock.slept = 0
    await expect(source.nextId(6)).rejects.toBeInstanceOf(ClockMovedBackwardsError)
    expect(clock.slept).toBe(0)
    clock.now += 30
    const after = await source.nextIds(6, 10)
    expect(after[0]! > before.at(-1)!).toBe(true)
  })

  it('never repeats under concurrent callers while the clock jumps back and forth', async () => {
    const clock = fakeClock(Date.now() + 180_000)
    const clients = [open(clock), open(clock), open(clock)]
    const steps = [0, -7, 3, -9, 12, -4, 6, -8]
    const all: bigint[] = []
    for (const step of steps) {
      clock.now += step
      const rounds = await Promise.all(
        clients.flatMap((source, i) =>
          Array.from({ length: 4 }, (_, j) =>
            (i + j) % 2 === 0 ? source.nextIds(4, 300) : source.nextId(4).then((id) => [id]),
          ),
        ),
      )
      all.push(...rounds.flat())
    }
    expect(new Set(all).size).toBe(all.length)
    for (const id of all) expect(instagram.shardOf(id)).toBe(4)
  })
})
