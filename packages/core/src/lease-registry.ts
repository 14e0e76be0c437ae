import { LeaseExpiredError, NoFreeLeaseError, serverCall } from './errors'
import type { Sharding } from './sharding'

/** What a holder asks a {@link LeaseRegistry} for. */
export interface LeaseRequest {
  /** The application's sharding; a registry records it and refuses a different one. */
  readonly sharding: Sharding
  /** Who holds the lease, for people reading `shardflake leases` (host, pid). */
  readonly holder: string
  /** How long the lease lasts from when the registry grants or renews it, in ms. */
  readonly ttlMs: number
  /**
   * The highest time (ms since 1970) the holder may put into an ID until its next renewal,
   * recorded before any ID uses it. The next holder of the worker starts above it.
   */
  readonly highWaterMs: number
}

/** A worker id held exclusively, until `ttlMs` after the last grant or renewal. */
export interface WorkerLease {
  readonly worker: number
  /** Fencing token: grows with every grant of any worker, never reused. */
  readonly token: bigint
  readonly holder: string
  /** The previous holder's high-water mark (ms since 1970; 0 when none): IDs start above it. */
  readonly startAfterMs: number
  readonly ttlMs: number
}

/** One worker as `shardflake leases` shows it. */
export interface LeaseRecord {
  readonly worker: number
  /** `null` when free. */
  readonly holder: string | null
  readonly token: bigint
  /** When the lease expires (registry's clock); `null` when free. */
  readonly expiresAt: Date | null
  /** The highest time a holder of this worker may have issued, ms since 1970. */
  readonly highWaterMs: number
}

/**
 * Where worker leases live: a table in PostgreSQL or MySQL/MariaDB, or keys in Redis. Each
 * database package implements it; the contract is the same everywhere.
 *
 * - `acquire` grants a free or expired worker (an expired one only after its TTL passed on the
 *   registry's clock), records `highWaterMs` and a new fencing token in the same atomic step,
 *   and returns the previous high-water mark as `startAfterMs`.
 * - `renew` extends the lease and raises the high-water mark, only while the token still holds;
 *   otherwise it throws `LeaseExpiredError`.
 * - `release` frees the worker at once and records the highest time its holder really issued
 *   (at or below the mark reserved ahead), so the next holder need not wait for the reserve.
 */
export interface LeaseRegistry {
  /** @throws NoFreeLeaseError when every worker is held; ShardingMismatchError. */
  acquire(request: LeaseRequest): Promise<WorkerLease>
  /** @throws LeaseExpiredError when the token no longer holds the worker. */
  renew(lease: WorkerLease, highWaterMs: number): Promise<void>
  release(lease: WorkerLease, issuedMs: number): Promise<void>
  /** Every worker, held or free. */
  list(): Promise<LeaseRecord[]>
  /** Frees a worker whose holder is known to be dead (keeps its high-water mark). */
  free(worker: number): Promise<void>
  /** Ends what the registry opened. */
  close(): Promise<void>
}

/**
 * Runs one call of a lease registry on its server: shardflake's own errors pass through, anything
 * else (the driver's) becomes `SourceUnavailableError` with it as `cause`. Every registry wraps
 * its calls in this.
 * @example
 * ```ts
 * import { registryCall } from '@shardflake/core'
 * declare const pool: { query(sql: string): Promise<unknown> }
 *
 * await registryCall(() => pool.query('SELECT 1'))
 * ```
 */
export function registryCall<T>(command: () => Promise<T>): Promise<T> {
  return serverCall('The lease registry could not be reached or refused the call', command)
}

/** The error a registry throws when every worker it may lease is held or reserved. */
export function allWorkersHeld(request: LeaseRequest, reserved: string): NoFreeLeaseError {
  return new NoFreeLeaseError(
    `All ${request.sharding.layout.workerCount} workers are leased by live holders or reserved for database functions (${reserved}). Retry after a TTL, free dead holders with \`shardflake leases\`, or use a layout with more worker bits.`,
  )
}

/** The error a registry throws when a renewal finds its token no longer holds the worker. */
export function leaseLost(lease: WorkerLease): LeaseExpiredError {
  return new LeaseExpiredError(
    `The lease of worker ${lease.worker} (token ${lease.token}) is no longer held: it expired and was granted again, was freed, or the registry lost its data.`,
  )
}

/**
 * A registry's setup (creating its storage, checking the sharding recorded there), run once for
 * each sharding the registry is used with. Holders that start together race on creating the
 * storage, so a failed setup is tried once more at once; one that fails again is retried on the
 * next call.
 * @example
 * ```ts
 * import { RegistrySetup, type Sharding } from '@shardflake/core'
 * declare function createTables(sharding: Sharding): Promise<void>
 * declare const sharding: Sharding
 *
 * const setup = new RegistrySetup(createTables)
 * await setup.readyFor(sharding) // creates and checks once; later calls wait for the same promise
 * ```
 */
export class RegistrySetup {
  private readonly ready = new Map<string, Promise<void>>()

  constructor(private readonly setup: (sharding: Sharding) => Promise<void>) {}

  /** Resolves once the storage exists and records this sharding. @throws ShardingMismatchError */
  readyFor(sharding: Sharding): Promise<void> {
    const key = JSON.stringify(sharding.toJSON())
    let ready = this.ready.get(key)
    if (!ready) {
      ready = this.setup(sharding)
        .catch(() => this.setup(sharding))
        .catch((error: unknown) => {
          this.ready.delete(key)
          throw error
        })
      this.ready.set(key, ready)
    }
    return ready
  }
}
