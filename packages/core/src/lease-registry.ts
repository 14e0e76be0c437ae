import { ConfigurationError, LeaseExpiredError, NoFreeLeaseError, serverCall } from './errors'
import { checkKnownOptions } from './known-options'
import type { Sharding } from './sharding'
import { readDuration, SOURCE_DEFAULTS } from './source-options'

/** What a holder asks a {@link LeaseRegistry} for. */
export interface LeaseRequest {
  /** The application's sharding; a registry records it and refuses a different one. */
  readonly sharding: Sharding
  /** Who holds the lease, for people reading `shardflake leases` (host, pid). */
  readonly holder: string
  /**
   * A random id of the holder, new for every started source: renewals and releases must name
   * it, so a lease can only be renewed by the source it was granted to.
   */
  readonly holderId: string
  /** How long the lease lasts from when the registry grants or renews it, in ms (at most its `maxTtlMs`). */
  readonly ttlMs: number
  /**
   * The highest time (ms since 1970) the holder may put into an ID until its next renewal,
   * recorded before any ID uses it. The next holder of the worker starts above it.
   */
  readonly highWaterMs: number
  /**
   * The latest previous high-water mark (ms since 1970) this holder can start above without
   * refusing: its clock plus what it may wait. The registry grants a worker whose mark is at or
   * below it when it has one (a worker freed while its mark was still ahead is taken last).
   */
  readonly startByMs: number
}

/** A worker id held exclusively, until `ttlMs` after the last grant or renewal. */
export interface WorkerLease {
  readonly worker: number
  /**
   * Fencing token: grows with every grant of any worker and is never granted twice, even by a
   * registry that lost its data (it is at least the registry server's clock in microseconds).
   */
  readonly token: bigint
  readonly holder: string
  /** The holder's random id ({@link LeaseRequest.holderId}): renewals and releases name it. */
  readonly holderId: string
  /**
   * IDs start above this (ms since 1970): the previous holder's high-water mark, and after the
   * registry lost its data, the end of its wait.
   */
  readonly startAfterMs: number
  readonly ttlMs: number
  /** The registry server's clock when it granted the lease (ms since 1970). */
  readonly grantedAtMs: number
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
 *   and returns the previous high-water mark as `startAfterMs`. It prefers a worker whose mark
 *   is at or below `startByMs`.
 * - `renew` extends the lease and raises the high-water mark, only while the worker is still
 *   held under this token by this `holderId`; otherwise it throws `LeaseExpiredError`.
 * - `release` frees the worker at once and records the highest time its holder really issued
 *   (never below the lease's `startAfterMs`), so the next holder need not wait for the reserve.
 * - A registry that finds it lost its data (storage found empty or replaced, a restart that may
 *   have lost writes, a renewal whose token the registry no longer knows) grants nothing for
 *   `maxTtlMs` on its clock, and grants after that start above the end of that wait: every holder
 *   it forgot has passed its last high-water mark by then. `quarantine()` does the same on
 *   demand, for a loss it cannot see (a table restored in place from an older copy).
 */
export interface LeaseRegistry {
  /**
   * The longest TTL a holder may ask for, in ms: how long the registry waits after losing its
   * data. Recorded in the registry; every process must use the same value.
   */
  readonly maxTtlMs: number
  /**
   * @throws NoFreeLeaseError when every worker is held, or while the registry waits after losing
   * its data.
   * @throws ShardingMismatchError; ConfigurationError for another `maxTtlMs` than recorded.
   */
  acquire(request: LeaseRequest): Promise<WorkerLease>
  /** @throws LeaseExpiredError when the worker is no longer held under this token by this holder. */
  renew(lease: WorkerLease, highWaterMs: number): Promise<void>
  release(lease: WorkerLease, issuedMs: number): Promise<void>
  /** Every worker, held or free. */
  list(): Promise<LeaseRecord[]>
  /** Frees a worker whose holder is known to be dead (keeps its high-water mark). */
  free(worker: number): Promise<void>
  /**
   * Declares that the registry may have lost data (its storage was restored from an older copy):
   * it grants nothing until `maxTtlMs` from now on its clock. Resolves to that instant, or `null`
   * when the registry holds no data yet (nothing to protect).
   */
  quarantine(): Promise<Date | null>
  /**
   * Records this object's `maxTtlMs` as the registry's (`shardflake leases --max-ttl`): every
   * process must then use it. Raising it is always safe; lowering it is refused while a live
   * lease has a longer TTL.
   * @throws ConfigurationError
   */
  recordMaxTtl(): Promise<void>
  /** Ends what the registry opened. */
  close(): Promise<void>
}

/** The defaults of the lease options, shared by every registry and by `LeasedSource`. */
export const LEASE_DEFAULTS = Object.freeze({
  /** How long a lease lasts without renewal (LeasedSource `ttlMs`), in ms. */
  ttlMs: 10_000,
  /** The longest TTL a registry grants, and how long it waits after losing its data, in ms. */
  maxTtlMs: 10_000,
  /** The longest a registry call may take before it fails with `TimedOutError`, in ms. */
  timeoutMs: SOURCE_DEFAULTS.timeoutMs,
})

/** The options every registry takes (each adds its own). */
export interface LeaseRegistryOptions {
  /**
   * The longest TTL a holder may ask for, in ms, and how long the registry grants nothing after
   * it finds it lost its data (so that every holder it forgot has stopped). Recorded in the
   * registry on first use; a registry object with another value is refused while that record
   * exists, so give every process the same one.
   * @default 10000
   */
  readonly maxTtlMs?: number
  /**
   * The longest one registry call (a grant, renewal, release, listing) may take, in ms: past it
   * the call fails with `TimedOutError` and its connection is dropped. It bounds
   * `LeasedSource.start()` and `close()`.
   * @default 2000
   */
  readonly timeoutMs?: number
  /** Workers never leased: those database functions or Redis servers write into their IDs. */
  readonly reservedWorkers?: readonly number[]
}

/** {@link LeaseRegistryOptions} read and checked, with their defaults. */
export interface RegistrySettings {
  readonly maxTtlMs: number
  readonly timeoutMs: number
  readonly reservedWorkers: readonly number[]
}

/**
 * Reads a registry's options: refuses unknown ones (naming the closest) and values out of bounds.
 * @param where Named in messages: `'PostgresLeaseRegistry options'`.
 * @param known Every option the registry reads, its own included.
 * @throws InvalidArgumentError
 * @example
 * ```ts
 * import { readRegistryOptions } from '@shardflake/core'
 *
 * const settings = readRegistryOptions('MyLeaseRegistry options', { maxTtlMs: 30_000 }, ['maxTtlMs', 'timeoutMs'], [0])
 * settings.maxTtlMs // 30000
 * ```
 */
export function readRegistryOptions(
  where: string,
  options: LeaseRegistryOptions | undefined,
  known: readonly string[],
  defaultReserved: readonly number[],
): RegistrySettings {
  checkKnownOptions(where, options, known, { required: false })
  const reserved = options?.reservedWorkers ?? defaultReserved
  if (!Array.isArray(reserved) || reserved.some((w) => !Number.isSafeInteger(w) || w < 0)) {
    throw new ConfigurationError(
      `${where}: reservedWorkers must be a list of worker ids (whole numbers from 0).`,
    )
  }
  return {
    maxTtlMs: readDuration('maxTtlMs', options?.maxTtlMs, LEASE_DEFAULTS.maxTtlMs, {
      min: 100,
      max: 600_000,
    }),
    timeoutMs: readDuration('timeoutMs', options?.timeoutMs, LEASE_DEFAULTS.timeoutMs, {
      min: 1,
      max: 600_000,
    }),
    reservedWorkers: [...new Set(reserved)],
  }
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

/** The error a registry throws when a renewal finds the worker no longer held by this lease. */
export function leaseLost(lease: WorkerLease): LeaseExpiredError {
  return new LeaseExpiredError(
    `The lease of worker ${lease.worker} (token ${lease.token}) is no longer held by this source: it expired and was granted again, or was freed.`,
  )
}

/**
 * The error a registry throws when a renewal finds the registry behind the lease (its token
 * unknown there): the registry lost data, and grants nothing until `until`.
 */
export function registryBehind(lease: WorkerLease, until: Date | null): LeaseExpiredError {
  return new LeaseExpiredError(
    `The lease registry no longer knows the lease of worker ${lease.worker} (token ${lease.token}): it lost data (restored from an older copy, or restarted without it)${until ? `, so it grants nothing until ${until.toISOString()}` : ''}. This source stopped at its high-water mark and takes a new lease when it can.`,
  )
}

/**
 * The error a registry throws while it waits after losing its data.
 * @param what the registry, for the message: `'The lease registry in schema "shardflake"'`.
 * @param why what it found: `'was found empty'`.
 */
export function registryWaiting(what: string, why: string, until: Date): NoFreeLeaseError {
  return new NoFreeLeaseError(
    `${what} ${why}, so it may have forgotten holders that still run: it grants no lease until ${until.toISOString()} (maxTtlMs after it found out), when every one of them has stopped at its high-water mark. Retry then.`,
  )
}

/** The error a registry throws for a request whose TTL is above its `maxTtlMs`. */
export function ttlAboveMax(request: LeaseRequest, maxTtlMs: number): ConfigurationError {
  return new ConfigurationError(
    `A lease of ${request.ttlMs} ms was asked for, above the registry's maxTtlMs ${maxTtlMs}: after losing its data the registry waits maxTtlMs, which must cover every holder's TTL. Lower ttlMs, or raise maxTtlMs on every registry object and in the registry (shardflake leases --max-ttl).`,
  )
}

/**
 * The error a registry throws when its recorded `maxTtlMs` is not the one it was given.
 * @param what the registry, for the message.
 */
export function maxTtlMismatch(what: string, recorded: number, given: number): ConfigurationError {
  return new ConfigurationError(
    `${what} records maxTtlMs ${recorded}, but this registry object was given ${given}. After losing its data a registry waits maxTtlMs before granting again, and that wait must cover every holder's TTL, so every process must use the same value: pass maxTtlMs: ${recorded}, or change the recorded value with \`shardflake leases --max-ttl\`.`,
  )
}

/** The error `recordMaxTtl` throws when a live lease has a longer TTL than the new maximum. */
export function lowerWhileHeld(what: string, maxTtlMs: number): ConfigurationError {
  return new ConfigurationError(
    `${what} cannot lower maxTtlMs to ${maxTtlMs} while a live lease has a longer TTL: its holder could still be running after a wait of ${maxTtlMs} ms. Stop those holders (or restart them with a shorter ttlMs), then try again.`,
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
