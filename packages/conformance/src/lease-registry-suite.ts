import { randomBytes } from 'node:crypto'
import {
  ConfigurationError,
  LeaseExpiredError,
  type LeaseRegistry,
  type LeaseRequest,
  NoFreeLeaseError,
  type WorkerLease,
} from '@shardflake/core'
import { describe, expect, it, onTestFinished } from 'vitest'
import { runTag } from './run-tag'
import { testLeasedSharding } from './shardings'

/** What {@link describeLeaseRegistry} takes. */
export interface LeaseRegistrySuiteOptions {
  /**
   * A registry object on `storage`: a schema, database or key prefix named after it, created by
   * the registry on first use. Called more than once for one storage (several processes).
   */
  open(storage: string, options: { readonly maxTtlMs: number }): LeaseRegistry
  /** Removes `storage` after a test. */
  drop(storage: string): Promise<void>
  /** True for a registry in this process's memory: one object is one registry. */
  readonly inMemory?: boolean
  /** Workers the registry never leases by default. @default [0] */
  readonly reserved?: readonly number[]
  /**
   * True when a new registry cannot be told from one that lost its data, so that its first
   * grant waits `maxTtlMs` (Redis).
   */
  readonly firstGrantWaits?: boolean
  /**
   * Takes a copy of `storage` and returns what makes the storage go back to it, the way this kind
   * of registry loses data: Redis restarted without persistence (every key gone), a SQL registry
   * restored from a dump (its tables replaced by the copy). Absent for a registry that cannot.
   */
  readonly snapshot?: (storage: string) => Promise<() => Promise<void>>
}

const sharding = testLeasedSharding(2)
/** Short, so that the waits after a loss take a moment. */
const MAX_TTL_MS = 600
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/**
 * The contract every {@link LeaseRegistry} keeps, on the real server of the registry: workers
 * granted exclusively with growing tokens, renewals fenced by token and holder, releases that never
 * lower a mark below where the lease started, workers a holder can start on preferred, and a
 * registry that lost its data (or is told so) granting nothing for `maxTtlMs` and never a token
 * twice.
 */
export function describeLeaseRegistry(name: string, options: LeaseRegistrySuiteOptions): void {
  const reserved = options.reserved ?? [0]
  const leasable = sharding.layout.workerCount - reserved.length

  /** A registry on storage of its own, dropped when the test ends. */
  function fresh(): { registry: LeaseRegistry; storage: string } {
    const storage = `sf_leases_${runTag(true)}`
    onTestFinished(() => options.drop(storage))
    return { registry: options.open(storage, { maxTtlMs: MAX_TTL_MS }), storage }
  }

  function request(overrides: Partial<LeaseRequest> = {}): LeaseRequest {
    const now = Date.now()
    return {
      sharding,
      holder: 'suite',
      holderId: randomBytes(8).toString('hex'),
      ttlMs: 500,
      highWaterMs: now + 400,
      startByMs: now + 1000,
      ...overrides,
    }
  }

  /** A grant, through the wait of a new registry that cannot tell it is new. */
  async function grant(registry: LeaseRegistry, asked: Partial<LeaseRequest> = {}) {
    for (let attempt = 0; ; attempt++) {
      try {
        return await registry.acquire(request(asked))
      } catch (error) {
        if (!(error instanceof NoFreeLeaseError) || !/grants no lease until/.test(error.message)) {
          throw error
        }
        if (attempt > 20) throw error
        await sleep(MAX_TTL_MS / 4)
      }
    }
  }

  describe(`${name}: the lease registry contract`, () => {
    it(
      options.firstGrantWaits
        ? 'cannot tell a new registry from one that lost its data, so its first grant waits maxTtlMs'
        : 'grants at once on a new registry (it can tell it is new)',
      async () => {
        const { registry } = fresh()
        if (options.firstGrantWaits) {
          await expect(registry.acquire(request())).rejects.toThrow(/grants no lease until/)
          await sleep(MAX_TTL_MS + 50)
        }
        const lease = await registry.acquire(request())
        expect(reserved).not.toContain(lease.worker)
      },
    )

    it('grants each holder its own worker, never a reserved one, with growing tokens, and refuses when all are held', async () => {
      const { registry } = fresh()
      const leases: WorkerLease[] = []
      for (let i = 0; i < leasable; i++) leases.push(await grant(registry))
      const workers = leases.map((lease) => lease.worker)
      expect(new Set(workers).size).toBe(leasable)
      for (const worker of workers) expect(reserved).not.toContain(worker)
      for (let i = 1; i < leases.length; i++) {
        expect(leases[i]!.token).toBeGreaterThan(leases[i - 1]!.token)
      }
      // A token is at least the registry server's clock in microseconds, so one that lost its
      // counter never grants a token again.
      expect(leases[0]!.token).toBeGreaterThan(BigInt(Date.now() - 60_000) * 1000n)
      await expect(registry.acquire(request())).rejects.toBeInstanceOf(NoFreeLeaseError)
      const held = (await registry.list()).filter((record) => record.holder !== null)
      expect(held.map((record) => record.worker).sort()).toEqual([...workers].sort())
    })

    it('renews a lease only for the holder it was granted to, under the token it was granted with', async () => {
      const { registry } = fresh()
      const holderId = randomBytes(8).toString('hex')
      const first = await grant(registry, { holderId })
      await registry.free(first.worker)
      // The same holder takes the same worker again: a new token.
      const second = await grant(registry, { holderId })
      expect(second.worker).toBe(first.worker)
      expect(second.token).toBeGreaterThan(first.token)
      await expect(registry.renew(first, Date.now() + 400)).rejects.toBeInstanceOf(
        LeaseExpiredError,
      )
      await expect(
        registry.renew({ ...second, holderId: 'another holder' }, Date.now() + 400),
      ).rejects.toBeInstanceOf(LeaseExpiredError)
      await registry.renew(second, Date.now() + 400)
      await registry.release(second, Date.now())
      await expect(registry.renew(second, Date.now() + 400)).rejects.toBeInstanceOf(
        LeaseExpiredError,
      )
    })

    it('refuses to renew a lease that expired and was granted to another holder', async () => {
      const { registry } = fresh()
      const expiring = await grant(registry, { ttlMs: 150, highWaterMs: Date.now() + 100 })
      for (let i = 1; i < leasable; i++) await grant(registry)
      await sleep(300)
      const next = await registry.acquire(request())
      expect(next.worker).toBe(expiring.worker)
      expect(next.startAfterMs).toBeGreaterThanOrEqual(expiring.startAfterMs)
      await expect(registry.renew(expiring, Date.now() + 400)).rejects.toBeInstanceOf(
        LeaseExpiredError,
      )
      await registry.renew(next, Date.now() + 400)
    })

    it('records at release what was issued, never below where the lease started', async () => {
      const { registry } = fresh()
      const ahead = Date.now() + 300_000
      const first = await grant(registry, { highWaterMs: ahead })
      await registry.release(first, ahead)
      const second = await grant(registry, { startByMs: ahead + 1 })
      expect(second.worker).toBe(first.worker)
      expect(second.startAfterMs).toBe(ahead)
      // Closed without issuing anything: it says 0.
      await registry.release(second, 0)
      const record = (await registry.list()).find((r) => r.worker === first.worker)
      expect(record?.highWaterMs).toBeGreaterThanOrEqual(ahead)
      const third = await grant(registry, { startByMs: ahead + 1 })
      expect(third.worker).toBe(first.worker)
      expect(third.startAfterMs).toBeGreaterThanOrEqual(ahead)
    })

    it('grants a worker the holder can start on first: one freed while its mark was ahead comes last', async () => {
      const { registry } = fresh()
      const ahead = Date.now() + 300_000
      const freed = await grant(registry, { highWaterMs: ahead })
      await registry.free(freed.worker)
      const others: WorkerLease[] = []
      for (let i = 1; i < leasable; i++) others.push(await grant(registry))
      expect(others.map((lease) => lease.worker)).not.toContain(freed.worker)
      const last = await registry.acquire(request())
      expect(last.worker).toBe(freed.worker)
      expect(last.startAfterMs).toBe(ahead)
    })

    it('refuses a TTL above maxTtlMs', async () => {
      const { registry } = fresh()
      await expect(registry.acquire(request({ ttlMs: MAX_TTL_MS + 1 }))).rejects.toBeInstanceOf(
        ConfigurationError,
      )
    })

    if (options.inMemory !== true) {
      it('refuses a registry object given another maxTtlMs than the registry recorded', async () => {
        const { registry, storage } = fresh()
        await grant(registry)
        const other = options.open(storage, { maxTtlMs: MAX_TTL_MS * 2 })
        const refused = other.acquire(request())
        await expect(refused).rejects.toBeInstanceOf(ConfigurationError)
        await expect(refused).rejects.toThrow(new RegExp(`records maxTtlMs ${MAX_TTL_MS}`))
      })
    }

    it('after quarantine() grants nothing for maxTtlMs, keeps renewing its holders, then starts above the wait', async () => {
      const { registry } = fresh()
      const held = await grant(registry)
      const until = await registry.quarantine()
      expect(until).toBeInstanceOf(Date)
      await expect(registry.acquire(request())).rejects.toThrow(/grants no lease until/)
      await registry.renew(held, Date.now() + 400)
      await sleep(Math.max(0, until!.getTime() - Date.now()) + 50)
      const after = await registry.acquire(request())
      expect(after.startAfterMs).toBeGreaterThanOrEqual(until!.getTime())
    })

    it('a renewal that finds the registry behind its token makes the registry wait maxTtlMs', async () => {
      const { registry } = fresh()
      const held = await grant(registry)
      // A token the registry never granted: as after a restore from a copy older than the grant.
      const fromTheFuture = { ...held, token: held.token + 10_000_000_000n }
      await expect(registry.renew(fromTheFuture, Date.now() + 400)).rejects.toThrow(
        /no longer knows the lease/,
      )
      await expect(registry.acquire(request())).rejects.toThrow(/grants no lease until/)
    })

    if (options.snapshot) {
      const snapshot = options.snapshot
      it('after losing its data grants nothing for maxTtlMs, then starts above every mark it forgot, with a new token', async () => {
        const { registry, storage } = fresh()
        await grant(registry) // the registry exists
        const restore = await snapshot(storage)
        // Granted after the copy: the restored registry forgets this holder, its token and mark.
        const mark = Date.now() + 400
        const forgotten = await grant(registry, { highWaterMs: mark })
        await restore()
        await expect(registry.acquire(request())).rejects.toThrow(/grants no lease until/)
        await expect(registry.renew(forgotten, Date.now() + 400)).rejects.toBeInstanceOf(
          LeaseExpiredError,
        )
        await sleep(MAX_TTL_MS + 50)
        const leases = [await registry.acquire(request())]
        for (let i = 1; i < leasable; i++) leases.push(await registry.acquire(request()))
        expect(leases.map((lease) => lease.worker)).toContain(forgotten.worker)
        for (const lease of leases) {
          expect(lease.token).toBeGreaterThan(forgotten.token)
          // Whichever worker it gets, a new holder starts above what the forgotten one may issue.
          expect(lease.startAfterMs).toBeGreaterThanOrEqual(mark)
        }
      })
    }
  })
}
