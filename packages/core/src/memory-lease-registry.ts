import { checkKnownOptions } from './known-options'
import {
  allWorkersHeld,
  LEASE_DEFAULTS,
  type LeaseRecord,
  type LeaseRegistry,
  type LeaseRequest,
  leaseLost,
  registryBehind,
  registryWaiting,
  ttlAboveMax,
  type WorkerLease,
} from './lease-registry'
import type { Sharding } from './sharding'
import { readDuration } from './source-options'

/** What {@link MemoryLeaseRegistry} takes. */
export interface MemoryLeaseRegistryOptions {
  /** The registry's clock, ms since 1970. @default Date.now */
  readonly clock?: () => number
  /** As on the other registries: the longest TTL it grants, and its wait after `quarantine()`. @default 10000 */
  readonly maxTtlMs?: number
}

interface Slot {
  holder: string | null
  holderId: string | null
  token: bigint
  expiresAt: number
  highWaterMs: number
  startAfterMs: number
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
  readonly maxTtlMs: number
  private readonly clock: () => number
  private readonly slots = new Map<number, Slot>()
  private token = 0n
  private sharding: Sharding | undefined
  /** When it was last told it lost data (its clock), and when its wait after that ends. */
  private lostAt = Number.NEGATIVE_INFINITY
  private waitUntil = 0

  /** @throws InvalidArgumentError for unknown options or values out of bounds. */
  constructor(options: MemoryLeaseRegistryOptions = {}) {
    checkKnownOptions('MemoryLeaseRegistry options', options, ['clock', 'maxTtlMs'])
    this.clock = options.clock ?? Date.now
    this.maxTtlMs = readDuration('maxTtlMs', options.maxTtlMs, LEASE_DEFAULTS.maxTtlMs, {
      min: 100,
      max: 600_000,
    })
  }

  async acquire(request: LeaseRequest): Promise<WorkerLease> {
    if (this.sharding) this.sharding.checkSame(request.sharding, 'The lease registry')
    this.sharding ??= request.sharding
    if (request.ttlMs > this.maxTtlMs) {
      throw ttlAboveMax(request, this.maxTtlMs)
    }
    const now = this.clock()
    if (now < this.waitUntil) {
      throw registryWaiting('The lease registry', 'was told it lost data', new Date(this.waitUntil))
    }
    let chosen: number | undefined
    let chosenRank = Number.POSITIVE_INFINITY
    for (let worker = 0; worker < request.sharding.layout.workerCount; worker++) {
      const slot = this.slots.get(worker)
      if (slot && slot.holder !== null && slot.expiresAt > now) continue
      // A worker this holder can start on within its wait first, then free before expired.
      const rank =
        ((slot?.highWaterMs ?? 0) > request.startByMs ? 2 : 0) + (slot?.holder != null ? 1 : 0)
      if (rank < chosenRank) {
        chosen = worker
        chosenRank = rank
      }
    }
    if (chosen === undefined) throw allWorkersHeld(request, 'none')
    // At least the clock in microseconds, as every registry: a token is never granted twice.
    this.token = BigInt(Math.max(Number(this.token) + 1, Math.floor(now * 1000)))
    const startAfterMs = Math.max(this.slots.get(chosen)?.highWaterMs ?? 0, this.waitUntil)
    this.slots.set(chosen, {
      holder: request.holder,
      holderId: request.holderId,
      token: this.token,
      expiresAt: now + request.ttlMs,
      highWaterMs: Math.max(startAfterMs, request.highWaterMs),
      startAfterMs,
    })
    return {
      worker: chosen,
      token: this.token,
      holder: request.holder,
      holderId: request.holderId,
      startAfterMs,
      ttlMs: request.ttlMs,
      grantedAtMs: now,
    }
  }

  async renew(lease: WorkerLease, highWaterMs: number): Promise<void> {
    const slot = this.slots.get(lease.worker)
    if (!slot || slot.token < lease.token || this.token < lease.token) {
      // This registry does not know that token: it forgot. A lease granted before the last loss
      // it found is covered by the wait that loss started.
      if (lease.grantedAtMs > this.lostAt) await this.quarantine()
      throw registryBehind(lease, new Date(this.waitUntil))
    }
    if (slot.token !== lease.token || slot.holderId !== lease.holderId || slot.holder === null) {
      throw leaseLost(lease)
    }
    slot.expiresAt = this.clock() + lease.ttlMs
    slot.highWaterMs = Math.max(slot.highWaterMs, highWaterMs)
  }

  async release(lease: WorkerLease, issuedMs: number): Promise<void> {
    const slot = this.slots.get(lease.worker)
    if (!slot || slot.token !== lease.token || slot.holderId !== lease.holderId) return
    slot.holder = null
    slot.holderId = null
    slot.highWaterMs = Math.max(issuedMs, slot.startAfterMs)
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
    if (slot) {
      slot.holder = null
      slot.holderId = null
    }
  }

  async quarantine(): Promise<Date> {
    this.lostAt = this.clock()
    this.waitUntil = Math.max(this.waitUntil, this.lostAt + this.maxTtlMs)
    return new Date(this.waitUntil)
  }

  /** Nothing to record: this object is the registry. */
  async recordMaxTtl(): Promise<void> {}

  async close(): Promise<void> {}
}
