import { LeaseExpiredError, NoFreeLeaseError } from './errors'
import type { LeaseRecord, LeaseRegistry, LeaseRequest, WorkerLease } from './lease-registry'
import type { Sharding } from './sharding'

interface Slot {
  holder: string | null
  token: bigint
  expiresAt: number
  highWaterMs: number
}

/**
 * A {@link LeaseRegistry} in this process's memory: for tests and for several sources inside one
 * process. It cannot keep processes apart; use the PostgreSQL, MySQL or Redis registry for that.
 * @example
 * ```ts
 * import { MemoryLeaseRegistry } from '@shardflake/core'
 *
 * const registry = new MemoryLeaseRegistry()
 * ```
 */
export class MemoryLeaseRegistry implements LeaseRegistry {
  private readonly slots = new Map<number, Slot>()
  private token = 0n
  private sharding: Sharding | undefined

  constructor(private readonly clock: () => number = Date.now) {}

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    if (this.sharding) this.sharding.checkSame(request.sharding, 'The lease registry')
    this.sharding ??= request.sharding
    const now = this.clock()
    for (let worker = 0; worker < request.sharding.layout.workerCount; worker++) {
      const slot = this.slots.get(worker)
      if (slot && slot.holder !== null && slot.expiresAt > now) continue
      this.token += 1n
      const startAfterMs = slot?.highWaterMs ?? 0
      this.slots.set(worker, {
        holder: request.holder,
        token: this.token,
        expiresAt: now + request.ttlMs,
        highWaterMs: Math.max(startAfterMs, request.highWaterMs),
      })
      return {
        worker,
        token: this.token,
        holder: request.holder,
        startAfterMs,
        ttlMs: request.ttlMs,
      }
    }
    throw new NoFreeLeaseError(
      `All ${request.sharding.layout.workerCount} workers are leased. Retry after a TTL, or use a layout with more worker bits.`,
    )
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const slot = this.slots.get(lease.worker)
    if (
      !slot ||
      slot.token !== lease.token ||
      slot.holder === null ||
      slot.expiresAt <= this.clock()
    ) {
      throw new LeaseExpiredError(`The lease of worker ${lease.worker} is no longer held.`)
    }
    slot.expiresAt = this.clock() + lease.ttlMs
    slot.highWaterMs = Math.max(slot.highWaterMs, highWaterMs)
  }

  async release(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const slot = this.slots.get(lease.worker)
    if (!slot || slot.token !== lease.token) return
    slot.holder = null
    slot.highWaterMs = highWaterMs
  }

  async list(): Promise<LeaseRecord[]> {
    return [...this.slots].map(([worker, slot]) => ({
      worker,
      holder: slot.holder,
      token: slot.token,
      expiresAt: slot.holder === null ? null : new Date(slot.expiresAt),
      highWaterMs: slot.highWaterMs,
    }))
  }

  async free(worker: number): Promise<void> {
    const slot = this.slots.get(worker)
    if (slot) slot.holder = null
  }

  async close(): Promise<void> {}
}
