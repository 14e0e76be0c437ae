import { describe, expect, it, onTestFinished } from 'vitest'
import {
  ClockMovedBackwardsError,
  defineLayout,
  defineSharding,
  LeasedSource,
  type LeasedSourceOptions,
  type LeaseRegistry,
  MemoryLeaseRegistry,
} from '../src'

const layout = defineLayout({
  name: 'leased',
  epoch: '2025-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  workerBits: 2,
  sequenceBits: 8,
})
const sharding = defineSharding({ layout, logicalShards: 64 })

/** A wall clock (this process's) and a monotonic clock (the registry's) the test moves by hand. */
function clocks(start = Date.UTC(2026, 0, 1)) {
  let wall = start
  let mono = start
  const slept: number[] = []
  return {
    slept,
    clock: () => wall,
    monotonic: () => mono,
    advance(ms: number) {
      wall += ms
      mono += ms
    },
    sleep: async (ms: number) => {
      slept.push(ms)
      wall += ms
      mono += ms
    },
    stepWall(ms: number) {
      wall += ms
    },
  }
}

async function start(options: LeasedSourceOptions): Promise<LeasedSource> {
  const source = await LeasedSource.start(options)
  onTestFinished(() => source.close())
  return source
}

/** What `start` returns or throws (a source it returns is closed when the test ends). */
function attempt(options: LeasedSourceOptions): Promise<unknown> {
  return start(options).catch((error: unknown) => error)
}

/** The registry as a process that dies sees it: its release never arrives. */
function dying(registry: MemoryLeaseRegistry): LeaseRegistry {
  return new Proxy(registry, {
    get(target, name, receiver) {
      if (name === 'release') return async () => {}
      const value: unknown = Reflect.get(target, name, receiver)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
}

/**
 * Every worker of the registry held with a 1000 ms TTL (marks 800 ms ahead), the first holder's
 * IDs issued, then all leases expired and this process's clock stepped back by `backMs`.
 */
async function workersBehind(backMs: number) {
  const time = clocks()
  const registry = new MemoryLeaseRegistry({ clock: time.monotonic })
  const options = { sharding, ttlMs: 1000, clock: time.clock, sleep: time.sleep }
  const first = await start({ ...options, registry: dying(registry) })
  const issued = first.nextIds(3, 50)
  await first.close()
  for (let i = 0; i < 3; i++) await start({ ...options, registry: dying(registry) })
  time.advance(1001) // every lease expired; every mark is ~800 ms after the start
  time.stepWall(-backMs)
  return { time, registry, options, issued }
}

describe('LeasedSource.start: the wait limit it applies is the one it states', () => {
  it('refuses a clock further behind than half the TTL even when maxStartWaitMs would allow it', async () => {
    // ~790 ms behind every mark: below maxStartWaitMs (2000 by default), above half of 1000.
    const { time, registry, options } = await workersBehind(1000)
    const refused = await attempt({ ...options, registry })
    expect(refused).toBeInstanceOf(ClockMovedBackwardsError)
    expect((refused as Error).message).toMatch(
      /the 500 ms start\(\) may wait \(maxStartWaitMs 2000, at most half of ttlMs 1000\)/,
    )
    expect((refused as ClockMovedBackwardsError).message).toMatch(/^This clock is \d+ ms behind/)
    // It stated 500 ms and waited for none of it: waiting 790 ms would let the fresh lease lapse.
    expect(time.slept).toEqual([])
  })

  it('refuses a clock further behind than maxStartWaitMs when that is below half the TTL', async () => {
    const { time, registry, options } = await workersBehind(700) // ~490 ms behind
    const refused = await attempt({ ...options, registry, maxStartWaitMs: 300 })
    expect(refused).toBeInstanceOf(ClockMovedBackwardsError)
    expect((refused as Error).message).toMatch(/the 300 ms start\(\) may wait \(maxStartWaitMs\)/)
    expect(time.slept).toEqual([])
  })

  it('waits within the stated limit, then starts above the previous holder’s IDs', async () => {
    const { time, registry, options, issued } = await workersBehind(600) // ~390 ms behind
    const next = await start({ ...options, registry })
    expect(time.slept).toHaveLength(1)
    expect(time.slept[0]).toBeGreaterThan(300)
    expect(time.slept[0]).toBeLessThanOrEqual(500)
    const ids = next.nextIds(3, 50)
    expect(new Set([...issued, ...ids]).size).toBe(100)
  })
})
