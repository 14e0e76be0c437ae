import { SourceUnavailableError } from '@shardflake/core'
import { beforeAll, describe, expect, it } from 'vitest'
import { ID_SCRIPT_SHA } from '../src/script'
import { fakeClock, sharding, testFixture } from './helpers'
import { runTag, type ThrowawayServer } from './redis-servers'

// Two throwaway servers: `victim` is shut down and started again, `stable` keeps running.
const prefix = `sf:redis:failover:${runTag}:`
let victim: ThrowawayServer
let stable: ThrowawayServer
const fixture = testFixture(() => ({
  sharding,
  servers: [victim.url, stable.url],
  keyPrefix: prefix,
}))
const open = fixture.source

beforeAll(async () => {
  ;[victim, stable] = await Promise.all([fixture.server(), fixture.server()])
})

describe('RedisSource failover and restarts', () => {
  it('reloads its script after SCRIPT FLUSH (NOSCRIPT)', async () => {
    const source = open({ servers: victim.url, keyPrefix: `${prefix}script:` })
    const admin = fixture.client(victim.url)
    const before = await source.nextIds(1, 10)
    await admin.script('FLUSH')
    expect(await admin.script('EXISTS', ID_SCRIPT_SHA)).toEqual([0])
    const after = await source.nextIds(1, 10)
    expect(await admin.script('EXISTS', ID_SCRIPT_SHA)).toEqual([1])
    expect(new Set([...before, ...after]).size).toBe(20)
  })

  it('keeps serving from the other server when one is shut down mid-run, and says which served', async () => {
    const source = open({ keyPrefix: `${prefix}run:` })
    const [victimName, stableName] = source.serverNames as [string, string]
    const served: { ids: bigint[]; servers: string[] }[] = []
    let stopped = false
    let failed = false
    let afterStop = 0
    const callers = Array.from({ length: 6 }, async (_, caller) => {
      while (!failed && (!stopped || afterStop < 5_000)) {
        const result = await source
          .nextIdsWithServer(2 + (caller % 2), 50)
          .catch((error: unknown) => {
            failed = true
            throw error
          })
        served.push(result)
        if (stopped) afterStop += result.ids.length
      }
    })
    while (served.length < 200 && !failed) await new Promise((resolve) => setTimeout(resolve, 5))
    await victim.kill('SIGTERM')
    stopped = true
    await Promise.all(callers)

    const all = served.flatMap(({ ids }) => ids)
    const names = served.flatMap(({ servers }) => servers)
    expect(new Set(all).size).toBe(all.length)
    expect(names).toContain(victimName)
    expect(names.slice(-1_000).every((name) => name === stableName)).toBe(true)
    all.forEach((id, i) => {
      expect(source.serverNames[source.serverOf(id)]).toBe(names[i])
    })
  })

  it('throws SourceUnavailableError when no server answers', async () => {
    const source = open({ servers: victim.url, keyPrefix: `${prefix}down:` })
    const error = await source.nextId(4).catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(SourceUnavailableError)
    expect((error as SourceUnavailableError).code).toBe('SOURCE_UNAVAILABLE')
  })

  it('does not repeat IDs after a restart that lost all state, even within the same millisecond', async () => {
    await victim.restart()
    const frozenAt = Date.now() + 60_000
    const first = fakeClock(frozenAt)
    const before = open({
      servers: victim.url,
      keyPrefix: `${prefix}restart:`,
      maxDriftMs: 10,
      clock: first.read,
      sleep: first.sleep,
    })
    const issued = await before.nextIds(5, 12_000) // runs to maxDriftMs ahead of the clock
    await victim.restart()
    // A new process, nothing left in Redis, the server clock where it was before the restart
    // (a restart faster than maxDriftMs).
    const second = fakeClock(first.now)
    const after = open({
      servers: victim.url,
      keyPrefix: `${prefix}restart:`,
      maxDriftMs: 10,
      clock: second.read,
      sleep: second.sleep,
    })
    const fresh = await after.nextIds(5, 12_000)
    expect(new Set([...issued, ...fresh]).size).toBe(24_000)
    expect(fresh[0]! > issued.at(-1)!).toBe(true)
    // The first process, its clock stepped back 5 ms, continues above what it had seen.
    first.now -= 5
    const again = await before.nextIds(5, 1_000)
    expect(new Set([...issued, ...fresh, ...again]).size).toBe(25_000)
    expect(again[0]! > issued.at(-1)!).toBe(true)
  })

  it('with floorOf, does not repeat IDs even when the clock also stepped back across the restart', async () => {
    const keyPrefix = `${prefix}floor:`
    const clock = fakeClock(Date.now() + 120_000)
    const options = { servers: victim.url, keyPrefix, maxDriftMs: 10 }
    const before = open({ ...options, clock: clock.read, sleep: clock.sleep })
    const issued = await before.nextIds(6, 12_000)
    await victim.restart()
    const stepped = fakeClock(clock.now - 5)
    const stored = issued.at(-1)! // what the application's table holds for the shard
    const after = open({
      ...options,
      clock: stepped.read,
      sleep: stepped.sleep,
      floorOf: async (shard) => (shard === 6 ? stored : undefined),
    })
    const fresh = await after.nextIds(6, 5_000)
    expect(new Set([...issued, ...fresh]).size).toBe(17_000)
    expect(fresh[0]! > stored).toBe(true)
    expect(stepped.slept).toBeGreaterThan(0)
  })

  it('without floorOf, a clock stepped back across a restart can repeat IDs (the documented limit)', async () => {
    const keyPrefix = `${prefix}nofloor:`
    const clock = fakeClock(Date.now() + 180_000)
    const options = { servers: victim.url, keyPrefix, maxDriftMs: 10 }
    const before = open({ ...options, clock: clock.read, sleep: clock.sleep })
    const issued = await before.nextIds(7, 12_000)
    await victim.restart()
    const stepped = fakeClock(clock.now - 5)
    const after = open({ ...options, clock: stepped.read, sleep: stepped.sleep })
    const fresh = await after.nextIds(7, 12_000)
    expect(new Set([...issued, ...fresh]).size).toBeLessThan(24_000)
  })
})
