import { describe, expect, it, onTestFinished } from 'vitest'
import {
  ClockMovedBackwardsError,
  ConfigurationError,
  defineLayout,
  defineSharding,
  LeasedSource,
  type LeasedSourceOptions,
  LeaseExpiredError,
  type LeaseRegistry,
  MemoryLeaseRegistry,
  NoFreeLeaseError,
  workerFromEnvironment,
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

/** A wall clock and a monotonic clock the test moves by hand. */
function clocks(start = Date.UTC(2026, 0, 1)) {
  let wall = start
  let mono = 0
  return {
    clock: () => wall,
    monotonic: () => mono,
    advance(ms: number) {
      wall += ms
      mono += ms
    },
    sleep: async (ms: number) => {
      wall += ms
      mono += ms
    },
    stepWall(ms: number) {
      wall += ms
    },
  }
}

/** Starts a source that is closed when the test ends, whatever happens. */
async function start(options: LeasedSourceOptions): Promise<LeasedSource> {
  const source = await LeasedSource.start(options)
  onTestFinished(() => source.close())
  return source
}

/** The registry as a process that dies sees it: its release never arrives. */
function dying(registry: LeaseRegistry): LeaseRegistry {
  return {
    acquire: (request) => registry.acquire(request),
    renew: (lease, mark) => registry.renew(lease, mark),
    release: async () => {},
    list: () => registry.list(),
    free: (worker) => registry.free(worker),
    close: () => registry.close(),
  }
}

describe('LeasedSource', () => {
  it('gives each process its own worker, so IDs of one shard never meet', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry(time.clock)
    const options = { sharding, registry, clock: time.clock }
    const a = await start({ ...options, holder: 'a' })
    const b = await start({ ...options, holder: 'b' })
    expect(a.lease.worker).not.toBe(b.lease.worker)
    expect(b.lease.token).toBeGreaterThan(a.lease.token)
    const ids = [...a.nextIds(7, 200), ...b.nextIds(7, 200)]
    expect(new Set(ids).size).toBe(400)
    expect(ids.every((id) => sharding.shardOfId(id) === 7)).toBe(true)
    await a.close()
    await b.close()
  })

  it('refuses a fifth holder when four workers are held', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry(time.clock)
    const options = { sharding, registry, clock: time.clock }
    const held = await Promise.all([0, 1, 2, 3].map(() => LeasedSource.start(options)))
    await expect(LeasedSource.start(options)).rejects.toBeInstanceOf(NoFreeLeaseError)
    await Promise.all(held.map((source) => source.close()))
  })

  it('fails closed when renewals stop reaching the registry', async () => {
    const time = clocks()
    const inner = new MemoryLeaseRegistry(time.clock)
    let down = false
    const registry: LeaseRegistry = {
      acquire: (request) => inner.acquire(request),
      renew: async (lease, mark) => {
        if (down) throw new Error('registry unreachable')
        return inner.renew(lease, mark)
      },
      release: (lease, issued) => inner.release(lease, issued),
      list: () => inner.list(),
      free: (worker) => inner.free(worker),
      close: () => inner.close(),
    }
    const source = await start({
      sharding,
      registry,
      ttlMs: 1000,
      clock: time.clock,
    })
    source.nextId(1)
    down = true
    time.advance(700)
    await source.renew()
    expect(() => source.nextId(1)).not.toThrow() // 700 ms < 800 ms (TTL minus a fifth)
    time.advance(200)
    expect(() => source.nextId(1)).toThrow(LeaseExpiredError)
    down = false
    await source.renew().catch(() => undefined) // the attempt under way when it was down
    await source.renew()
    expect(typeof source.nextId(1)).toBe('bigint')
    await source.close()
  })

  it('starts above the previous holder’s high-water mark, waiting for a clock that is behind', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry(time.monotonic) // the registry's own clock does not step
    const first = await start({
      sharding,
      registry: dying(registry),
      holder: 'first',
      ttlMs: 1000,
      maxDriftMs: 0,
      clock: time.clock,
    })
    const issued = first.nextIds(3, 50)
    await first.close() // frees this process's claim; the registry hears nothing
    // The first holder dies without releasing; its lease expires; a new process whose clock is
    // 500 ms behind takes the same worker.
    time.advance(1001)
    time.stepWall(-1500)
    const second = await start({
      sharding,
      registry,
      holder: 'second',
      ttlMs: 5000,
      maxDriftMs: 0,
      maxStartWaitMs: 5000,
      sleep: time.sleep,
      clock: time.clock,
    })
    expect(second.lease.worker).toBe(first.lease.worker)
    expect(second.lease.startAfterMs).toBeGreaterThanOrEqual(
      layout.timeOf(issued.at(-1)!).getTime(),
    )
    const after = second.nextIds(3, 50)
    expect(layout.timeOf(after[0]!).getTime()).toBeGreaterThan(second.lease.startAfterMs)
    expect(new Set([...issued, ...after]).size).toBe(100)
    await second.close()
  })

  it('refuses to start when the clock is further behind the mark than it may wait', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry(time.clock)
    const first = await start({
      sharding,
      registry: dying(registry),
      ttlMs: 60_000,
      clock: time.clock,
    })
    first.nextId(0)
    await first.close()
    await registry.free(first.lease.worker) // freed by an operator, its mark 60 s ahead
    await expect(
      LeasedSource.start({
        sharding,
        registry,
        maxStartWaitMs: 100,
        clock: time.clock,
      }),
    ).rejects.toBeInstanceOf(ClockMovedBackwardsError)
  })

  it('releases at close, so the next holder starts at once above what was issued', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry(time.clock)
    const options = {
      sharding,
      registry,
      clock: time.clock,
      maxStartWaitMs: 0,
    }
    const first = await start(options)
    const before = first.nextIds(9, 10)
    await first.close()
    const next = await start(options)
    expect(next.lease.worker).toBe(first.lease.worker)
    const after = next.nextIds(9, 10)
    expect(new Set([...before, ...after]).size).toBe(20)
    expect((await registry.list())[0]!.holder).not.toBeNull()
    await next.close()
  })

  it('survives a registry that loses its data while two sources of one process hold leases', async () => {
    const time = clocks()
    let inner = new MemoryLeaseRegistry(time.clock)
    const registry: LeaseRegistry = {
      acquire: (request) => inner.acquire(request),
      renew: (lease, mark) => inner.renew(lease, mark),
      release: (lease, issued) => inner.release(lease, issued),
      list: () => inner.list(),
      free: (worker) => inner.free(worker),
      close: () => inner.close(),
    }
    const options = { sharding, registry, ttlMs: 1000, clock: time.clock }
    const a = await start(options)
    const b = await start(options)
    const ids = [...a.nextIds(2, 50), ...b.nextIds(2, 50)]
    inner = new MemoryLeaseRegistry(time.clock) // wiped: it grants worker 0 first, which a holds
    // b renews first: its lease is gone, and the fresh registry offers it a's worker, which this
    // process still uses; the claim refuses it and b takes another one next time.
    await b.renew()
    await a.renew()
    await b.renew()
    expect(a.lease.worker).not.toBe(b.lease.worker)
    time.advance(1)
    ids.push(...a.nextIds(2, 50), ...b.nextIds(2, 50))
    expect(new Set(ids).size).toBe(200)
  })

  it('needs worker bits', async () => {
    const flat = defineSharding({
      layout: defineLayout({
        name: 'flat',
        epoch: 0,
        timeBits: 41,
        shardBits: 13,
        sequenceBits: 10,
      }),
      logicalShards: 8,
    })
    await expect(
      LeasedSource.start({ sharding: flat, registry: new MemoryLeaseRegistry() }),
    ).rejects.toBeInstanceOf(ConfigurationError)
  })
})

describe('workerFromEnvironment', () => {
  it('reads SHARDFLAKE_WORKER or a StatefulSet ordinal, and never masks', () => {
    expect(workerFromEnvironment(sharding, { SHARDFLAKE_WORKER: '3' })).toBe(3)
    expect(workerFromEnvironment(sharding, { HOSTNAME: 'api-2' })).toBe(2)
    expect(() => workerFromEnvironment(sharding, { HOSTNAME: 'api-4' })).toThrow(/0 to 3/)
    expect(() => workerFromEnvironment(sharding, { SHARDFLAKE_WORKER: 'x' })).toThrow(
      ConfigurationError,
    )
    expect(() => workerFromEnvironment(sharding, {})).toThrow(/SHARDFLAKE_WORKER/)
  })
})
