import { afterEach, describe, expect, it, onTestFinished, vi } from 'vitest'
import {
  ClockMovedBackwardsError,
  ConfigurationError,
  defineLayout,
  defineSharding,
  InvalidArgumentError,
  LeasedSource,
  type LeasedSourceOptions,
  LeaseExpiredError,
  type LeaseRegistry,
  MemoryLeaseRegistry,
  NoFreeLeaseError,
  ShardConflictError,
  type WorkerLease,
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
  let mono = start
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

/** `registry` with some of its calls replaced. */
function wrap(registry: () => LeaseRegistry, changes: Partial<LeaseRegistry> = {}): LeaseRegistry {
  return {
    get maxTtlMs() {
      return registry().maxTtlMs
    },
    acquire: (request) => registry().acquire(request),
    renew: (lease, mark) => registry().renew(lease, mark),
    release: (lease, issued) => registry().release(lease, issued),
    list: () => registry().list(),
    free: (worker) => registry().free(worker),
    quarantine: () => registry().quarantine(),
    recordMaxTtl: () => registry().recordMaxTtl(),
    close: () => registry().close(),
    ...changes,
  }
}

/** The registry as a process that dies sees it: its release never arrives. */
function dying(registry: LeaseRegistry): LeaseRegistry {
  return wrap(() => registry, { release: async () => {} })
}

describe('LeasedSource', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it('gives each process its own worker, so IDs of one shard never meet', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.clock })
    const options = { sharding, registry, clock: time.clock }
    const a = await start({ ...options, holder: 'a' })
    const b = await start({ ...options, holder: 'b' })
    expect(a.lease.worker).not.toBe(b.lease.worker)
    expect(b.lease.token).toBeGreaterThan(a.lease.token)
    expect(a.lease.holderId).not.toBe(b.lease.holderId)
    const ids = [...a.nextIds(7, 200), ...b.nextIds(7, 200)]
    expect(new Set(ids).size).toBe(400)
    expect(ids.every((id) => sharding.shardOfId(id) === 7)).toBe(true)
    await a.close()
    await b.close()
  })

  it('refuses a fifth holder when four workers are held', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.clock })
    const options = { sharding, registry, clock: time.clock }
    const held = await Promise.all([0, 1, 2, 3].map(() => LeasedSource.start(options)))
    await expect(LeasedSource.start(options)).rejects.toBeInstanceOf(NoFreeLeaseError)
    await Promise.all(held.map((source) => source.close()))
  })

  it('fails closed when renewals stop reaching the registry', async () => {
    const time = clocks()
    const inner = new MemoryLeaseRegistry({ clock: time.clock })
    let down = false
    const registry = wrap(() => inner, {
      renew: async (lease, mark) => {
        if (down) throw new Error('registry unreachable')
        return inner.renew(lease, mark)
      },
    })
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
    // The registry's own clock does not step.
    const registry = new MemoryLeaseRegistry({ clock: time.monotonic })
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
    for (let i = 0; i < 3; i++) await start({ sharding, registry, clock: time.clock })
    // The first holder dies without releasing; its lease expires; a new process whose clock is
    // 500 ms behind takes the same worker, the only one left.
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

  it('after a holder whose mark is ahead was freed, starts on a worker it can use instead of failing', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.clock, maxTtlMs: 60_000 })
    const first = await start({
      sharding,
      registry: dying(registry),
      ttlMs: 60_000,
      clock: time.clock,
    })
    first.nextId(0)
    await first.close()
    await registry.free(first.lease.worker) // freed by an operator, its mark 48 s ahead
    const next = await start({ sharding, registry, maxStartWaitMs: 100, clock: time.clock })
    expect(next.lease.worker).not.toBe(first.lease.worker)
    expect(typeof next.nextId(0)).toBe('bigint')
  })

  it('refuses to start when every worker it could take has a mark ahead of the registry too, and says so', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.clock, maxTtlMs: 60_000 })
    const options = { sharding, registry: dying(registry), ttlMs: 60_000, clock: time.clock }
    const held = [await start(options), await start(options), await start(options)]
    held.push(await start(options))
    for (const source of held) {
      await source.close()
      await registry.free(source.lease.worker)
    }
    const refused = await LeasedSource.start({
      sharding,
      registry,
      ttlMs: 1000,
      clock: time.clock,
    }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(ClockMovedBackwardsError)
    const { message } = refused as Error
    expect(message).toMatch(/ahead of the registry's clock as well/)
    expect(message).toMatch(/This clock is not at fault/)
    // The limit applied: half of the 1000 ms TTL, not the 2000 ms maxStartWaitMs.
    expect(message).toMatch(
      /the 500 ms start\(\) may wait \(maxStartWaitMs 2000, at most half of ttlMs 1000\)/,
    )
    expect(message).not.toMatch(/maxWaitMs/)
    // The worker it was offered went back to the pool.
    expect((await registry.list()).every((record) => record.holder === null)).toBe(true)
  })

  it('refuses to start when its own clock is further behind the mark than it may wait, and says so', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.monotonic })
    const first = await start({
      sharding,
      registry: dying(registry),
      ttlMs: 1000,
      clock: time.clock,
    })
    first.nextId(0)
    await first.close()
    for (let i = 0; i < 3; i++) await start({ sharding, registry, ttlMs: 1000, clock: time.clock })
    time.advance(1001) // the first lease expired; its worker is the only one to take
    time.stepWall(-2000) // this process's clock is 2 s behind the registry's
    const refused = await LeasedSource.start({
      sharding,
      registry,
      ttlMs: 1000,
      maxStartWaitMs: 300,
      clock: time.clock,
    }).catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(ClockMovedBackwardsError)
    const { message } = refused as Error
    expect(message).toMatch(/^This clock is \d+ ms behind the high-water mark/)
    expect(message).toMatch(/the 300 ms start\(\) may wait \(maxStartWaitMs\)/)
    expect(message).toMatch(/raise maxStartWaitMs/)
    expect(message).not.toMatch(/maxWaitMs/)
  })

  it('releases at close, so the next holder starts at once above what was issued', async () => {
    const time = clocks()
    const registry = new MemoryLeaseRegistry({ clock: time.clock })
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

  it('never records at close a mark below where its lease started, even when it issued nothing', async () => {
    const time = clocks()
    const inner = new MemoryLeaseRegistry({ clock: time.monotonic })
    const released: { lease: WorkerLease; issued: number }[] = []
    // A registry that records what it is told, as a registry may.
    const registry = wrap(() => inner, {
      release: async (lease, issued) => {
        released.push({ lease, issued })
        await inner.release(lease, issued)
      },
    })
    const options = { sharding, ttlMs: 1000, maxDriftMs: 0, clock: time.clock, sleep: time.sleep }
    // The first holder issues, then dies without releasing.
    const first = await start({ ...options, registry: dying(registry) })
    const issued = first.nextIds(5, 20)
    await first.close()
    const others = [await start({ ...options, registry }), await start({ ...options, registry })]
    others.push(await start({ ...options, registry }))
    // After its TTL a second takes the worker (the only one left; the others renew), and closes
    // without issuing anything.
    time.advance(1001)
    for (const other of others) await other.renew()
    const second = await start({ ...options, registry })
    expect(second.lease.worker).toBe(first.lease.worker)
    await second.close()
    expect(released.map((r) => r.lease.token)).toEqual([second.lease.token])
    expect(released[0]!.issued).toBeGreaterThanOrEqual(second.lease.startAfterMs)
    // A third starts with its clock behind the first one's IDs: it waits for the first's mark.
    time.stepWall(-1001)
    const third = await start({ ...options, registry, ttlMs: 2000, maxStartWaitMs: 1000 })
    expect(third.lease.worker).toBe(first.lease.worker)
    expect(new Set([...issued, ...third.nextIds(5, 20)]).size).toBe(40)
  })

  it('renews at once after a slow grant, so the mark taken when the request was sent never lapses', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] })
    const inner = new MemoryLeaseRegistry()
    // The grant takes 1.2 s of a 2 s TTL; renewals are quick.
    const registry = wrap(() => inner, {
      acquire: async (request) => {
        await new Promise((resolve) => setTimeout(resolve, 1200))
        return inner.acquire(request)
      },
    })
    const starting = LeasedSource.start({ sharding, registry, ttlMs: 2000 })
    await vi.advanceTimersByTimeAsync(1200)
    const source = await starting
    onTestFinished(() => source.close())
    const failures: unknown[] = []
    for (let elapsed = 0; elapsed < 6000; elapsed += 50) {
      try {
        source.nextId(1)
      } catch (error) {
        failures.push(error)
      }
      await vi.advanceTimersByTimeAsync(50)
    }
    expect(failures).toEqual([])
  })

  it('stops at its mark when the registry forgot its lease, and starts again above it once the registry waited', async () => {
    const time = clocks()
    let inner = new MemoryLeaseRegistry({ clock: time.clock, maxTtlMs: 1000 })
    const registry = wrap(() => inner)
    const options = { sharding, registry, ttlMs: 1000, clock: time.clock }
    const a = await start(options)
    const b = await start(options)
    const ids = [...a.nextIds(2, 50), ...b.nextIds(2, 50)]
    const marks = Math.max(a.lease.startAfterMs, b.lease.startAfterMs)
    inner = new MemoryLeaseRegistry({ clock: time.clock, maxTtlMs: 1000 }) // it lost everything
    // Renewals find a registry that does not know their tokens: it waits maxTtlMs from now on.
    await a.renew()
    await b.renew()
    expect(() => a.nextIds(2, 50)).not.toThrow() // still below its mark
    time.advance(900)
    expect(() => a.nextId(2)).toThrow(LeaseExpiredError)
    expect(() => b.nextId(2)).toThrow(LeaseExpiredError)
    await a.renew()
    expect(() => a.nextId(2)).toThrow(LeaseExpiredError) // the registry still waits
    time.advance(101)
    await a.renew()
    await b.renew()
    expect(a.lease.worker).not.toBe(b.lease.worker)
    expect(a.lease.startAfterMs).toBeGreaterThan(marks)
    ids.push(...a.nextIds(2, 50), ...b.nextIds(2, 50))
    expect(new Set(ids).size).toBe(ids.length)
  })

  it('refuses a second source for a worker this process already uses, and gives its lease back', async () => {
    const time = clocks()
    // Two registries for one sharding: each grants worker 0 first.
    const first = new MemoryLeaseRegistry({ clock: time.clock })
    const second = new MemoryLeaseRegistry({ clock: time.clock })
    const held = await start({ sharding, registry: first, clock: time.clock })
    await expect(
      LeasedSource.start({ sharding, registry: second, clock: time.clock }),
    ).rejects.toBeInstanceOf(ShardConflictError)
    expect((await second.list()).every((record) => record.holder === null)).toBe(true)
    expect(held.nextId(33)).toBeTypeOf('bigint')
  })

  it('needs worker bits, known options, and a TTL the registry grants', async () => {
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
    const registry = new MemoryLeaseRegistry()
    await expect(LeasedSource.start({ sharding: flat, registry })).rejects.toBeInstanceOf(
      ConfigurationError,
    )
    await expect(
      LeasedSource.start({ sharding, registry, ttlMS: 5000 } as LeasedSourceOptions),
    ).rejects.toThrow(/no option "ttlMS"\. Did you mean "ttlMs"\?/)
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 20_000 })).rejects.toThrow(
      /ttlMs 20000 is above the registry's maxTtlMs 10000/,
    )
    await expect(
      LeasedSource.start({ sharding, registry: {} as LeaseRegistry }),
    ).rejects.toBeInstanceOf(ConfigurationError)
    expect(() => new MemoryLeaseRegistry({ maxTTLMs: 5 } as never)).toThrow(InvalidArgumentError)
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
