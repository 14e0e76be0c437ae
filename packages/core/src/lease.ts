import {
  ClockMovedBackwardsError,
  ConfigurationError,
  LeaseExpiredError,
  NoFreeLeaseError,
  ShardflakeError,
  SourceUnavailableError,
} from './errors'
import { checkCount, type SyncIdSource } from './id-source'
import { InProcessSource } from './in-process-source'
import type { Sharding } from './sharding'
import { readDuration } from './source-options'

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

/** What {@link LeasedSource.start} takes. */
export interface LeasedSourceOptions {
  /** The application's sharding. Its layout needs worker bits: each process leases one worker. */
  readonly sharding: Sharding
  readonly registry: LeaseRegistry
  /** @default `<hostname>:<pid>` */
  readonly holder?: string
  /**
   * How long a lease lasts without renewal, in ms. The source renews every third of it and stops
   * issuing a fifth of it before it could have expired; a dead process's worker is free again
   * after it.
   * @default 10000
   */
  readonly ttlMs?: number
  /**
   * How long `start` may wait for the clock to pass the previous holder's high-water mark, in ms
   * (a clock behind the predecessor's), at most half of `ttlMs`. Longer gaps are refused with
   * `ClockMovedBackwardsError`.
   * @default 2000
   */
  readonly maxStartWaitMs?: number
  /** As on InProcessSource. @default 10 */
  readonly maxDriftMs?: number
  /** As on InProcessSource. @default 100 */
  readonly maxWaitMs?: number
  /** Wall clock, ms since 1970. @default Date.now */
  readonly clock?: () => number
  /** Waits `ms` (for a clock behind the previous holder's mark). Inject one with the clocks. @default setTimeout */
  readonly sleep?: (ms: number) => Promise<void>
}

/**
 * The in-process generator with a leased worker id: ~1M IDs per second per shard, synchronous,
 * and safe across processes, restarts and replicas without configuring anything per process.
 *
 * - Each process leases one **worker** from a registry on a server it already runs, so any
 *   process can make IDs for any shard: placement never depends on which process writes the row.
 * - It renews in the background and **fails closed**: it never puts a time into an ID beyond the
 *   high-water mark its last renewal recorded, a fifth of the TTL before the lease could expire;
 *   past it, `nextId` throws `LeaseExpiredError` instead of risking a repeat.
 * - Each lease records, ahead of use, the highest time its holder may issue. The next holder of
 *   the worker (after a crash, or another process after the TTL) starts above it, even when its
 *   clock is behind.
 * - `close()` releases the worker at once.
 *
 * @example
 * ```ts
 * import { defineLayout, defineSharding, LeasedSource, type LeaseRegistry } from '@shardflake/core'
 * declare const registry: LeaseRegistry // new PostgresLeaseRegistry(pool), RedisLeaseRegistry, ...
 *
 * const layout = defineLayout({ name: 'app', epoch: '2025-01-01T00:00:00Z', timeBits: 41, shardBits: 13, workerBits: 4, sequenceBits: 6 })
 * const sharding = defineSharding({ layout, logicalShards: 2000 })
 * const source = await LeasedSource.start({ sharding, registry })
 * source.nextId(sharding.shardForKey(31341n))
 * await source.close()
 * ```
 */
export class LeasedSource implements SyncIdSource {
  readonly sharding: Sharding
  readonly synchronous = true
  private current: WorkerLease
  private generator: InProcessSource
  private highWaterMs: number
  /** {@link highWaterMs} in layout time units: the guard compares with this on every new tick. */
  private highWaterTime: number
  private readonly timer: ReturnType<typeof setInterval>
  private renewing: Promise<void> | undefined
  private closed = false
  private lastFailure: unknown

  private constructor(
    private readonly options: Required<Omit<LeasedSourceOptions, 'registry' | 'sharding'>> &
      Pick<LeasedSourceOptions, 'registry' | 'sharding'>,
    lease: WorkerLease,
    highWaterMs: number,
  ) {
    this.sharding = options.sharding
    this.current = lease
    this.highWaterMs = highWaterMs
    this.highWaterTime = this.toTime(highWaterMs)
    this.generator = this.generatorFor(lease)
    this.timer = setInterval(() => void this.renew(), Math.max(1, Math.floor(options.ttlMs / 3)))
    this.timer.unref?.()
  }

  /**
   * Leases a worker and returns a source that makes IDs with it.
   * @throws NoFreeLeaseError when every worker is held.
   * @throws ClockMovedBackwardsError when this clock is further behind the previous holder's
   * high-water mark than `maxStartWaitMs`.
   * @throws ConfigurationError for a layout without worker bits.
   */
  static async start(options: LeasedSourceOptions): Promise<LeasedSource> {
    const { sharding, registry } = options
    if (sharding.layout.workerBits === 0) {
      throw new ConfigurationError(
        `A leased source leases a worker id, and layout ${JSON.stringify(sharding.layout.name)} has no worker bits. Define a layout with workerBits (for example 13 shard, 4 worker, 6 sequence bits) so any process can make IDs for any shard.`,
      )
    }
    sharding.layout.checkGenerating()
    const full = {
      sharding,
      registry,
      holder: options.holder ?? defaultHolder(),
      ttlMs: readDuration('ttlMs', options.ttlMs, 10_000, { min: 100, max: 600_000 }),
      maxStartWaitMs: readDuration('maxStartWaitMs', options.maxStartWaitMs, 2000, {
        max: 600_000,
      }),
      maxDriftMs: readDuration('maxDriftMs', options.maxDriftMs, 10),
      maxWaitMs: readDuration('maxWaitMs', options.maxWaitMs, 100, { max: 60_000 }),
      clock: options.clock ?? Date.now,
      sleep:
        options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))),
    }
    const { lease, highWaterMs } = await acquire(full)
    return new LeasedSource(full, lease, highWaterMs)
  }

  /** The lease in use now (it changes when the source had to take a new one). */
  get lease(): WorkerLease {
    return this.current
  }

  nextId(shard: number): bigint {
    this.check()
    return this.generator.nextId(shard)
  }

  nextIds(shard: number, count: number): bigint[] {
    checkCount(count)
    this.check()
    return this.generator.nextIds(shard, count)
  }

  /** Stops renewing and releases the worker at once, so another process may take it. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearInterval(this.timer)
    await this.renewing?.catch(() => undefined)
    // Record what was really issued, not the mark reserved ahead: the next holder need not wait.
    const issued = Math.max(this.generator.lastIssuedMs(), this.current.startAfterMs)
    this.generator.close()
    await this.options.registry.release(this.current, issued).catch(() => undefined)
  }

  /** Renews now (the background timer does this every third of the TTL). */
  renew(): Promise<void> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = undefined
    })
    return this.renewing
  }

  private async renewOnce(): Promise<void> {
    if (this.closed) return
    const { registry, clock, ttlMs } = this.options
    const highWaterMs = Math.max(this.highWaterMs, markFrom(clock(), ttlMs))
    try {
      await registry.renew(this.current, highWaterMs)
      this.highWaterMs = highWaterMs
      this.highWaterTime = this.toTime(highWaterMs)
      this.lastFailure = undefined
    } catch (error) {
      this.lastFailure = error
      if (!(error instanceof LeaseExpiredError) || this.closed) return
      // Another holder has the worker now: take a new lease, then switch generators.
      const next = await acquire(this.options).catch((failure: unknown) => {
        this.lastFailure = failure
        return undefined
      })
      if (!next || this.closed) {
        if (next) await registry.release(next.lease, next.highWaterMs).catch(() => undefined)
        return
      }
      this.generator.close()
      this.current = next.lease
      this.highWaterMs = next.highWaterMs
      this.highWaterTime = this.toTime(next.highWaterMs)
      this.generator = this.generatorFor(next.lease)
    }
  }

  private check(): void {
    if (this.closed) throw new ConfigurationError('This LeasedSource was closed; start a new one.')
  }

  /** The last time unit at or before `ms`. */
  private toTime(ms: number): number {
    const { layout } = this.sharding
    return Math.floor((ms - layout.epoch) / layout.timeUnitMs)
  }

  private generatorFor(lease: WorkerLease): InProcessSource {
    return new InProcessSource({
      sharding: this.sharding,
      worker: lease.worker,
      shards: 'all',
      startAfterMs: lease.startAfterMs,
      maxDriftMs: this.options.maxDriftMs,
      maxWaitMs: this.options.maxWaitMs,
      clock: this.options.clock,
      // The only check on the hot path, once per new tick: never beyond the recorded mark. The
      // mark sits a fifth of the TTL before the lease could expire, so this is also what stops
      // a holder whose renewals fail before anyone else may take its worker.
      guard: (time) => {
        if (time > this.highWaterTime) {
          void this.renew()
          throw new LeaseExpiredError(
            `The lease of worker ${lease.worker} was not renewed in time (its recorded high-water mark ${new Date(this.highWaterMs).toISOString()} is reached), so no ID was issued. The source keeps trying; check that the lease registry is reachable.`,
            { cause: this.lastFailure },
          )
        }
      },
    })
  }
}

async function acquire(
  options: Required<Omit<LeasedSourceOptions, 'registry' | 'sharding'>> &
    Pick<LeasedSourceOptions, 'registry' | 'sharding'>,
): Promise<{ lease: WorkerLease; highWaterMs: number }> {
  const { registry, sharding, holder, ttlMs, maxDriftMs, clock } = options
  const highWaterMs = markFrom(clock(), ttlMs)
  const lease = await registry.acquire({ sharding, holder, ttlMs, highWaterMs })
  // The previous holder may have issued up to its high-water mark: wait for this clock to pass it.
  const behind = lease.startAfterMs - maxDriftMs - clock()
  if (behind > 0) {
    // Never wait so long that the fresh lease could lapse before it is renewed below.
    if (behind > Math.min(options.maxStartWaitMs, ttlMs / 2)) {
      await registry.release(lease, lease.startAfterMs).catch(() => undefined)
      throw new ClockMovedBackwardsError(behind, options.maxStartWaitMs)
    }
    await options.sleep(behind + 1)
  }
  // After a wait, raise the mark so that this holder has a full TTL of room above it.
  let recorded = highWaterMs
  if (behind > 0) {
    recorded = Math.max(highWaterMs, markFrom(clock(), ttlMs))
    await registry.renew(lease, recorded)
  }
  return { lease, highWaterMs: recorded }
}

/**
 * The high-water mark a holder records before a grant or renewal sent at `now`: a fifth of the
 * TTL before the lease could expire. IDs never carry a later time, so a holder whose renewals
 * fail stops before the registry may grant its worker to someone else.
 */
function markFrom(now: number, ttlMs: number): number {
  return now + ttlMs - ttlMs / 5
}

function defaultHolder(): string {
  const host = globalThis.process?.env?.HOSTNAME ?? 'process'
  return `${host}:${globalThis.process?.pid ?? 0}`
}

/**
 * The worker id of this process from its environment, for deployments that hand out ids
 * themselves (no registry): `SHARDFLAKE_WORKER`, else the ordinal of a Kubernetes StatefulSet
 * pod (`HOSTNAME` = `app-3` gives 3). Validated against the layout, never masked or hashed.
 * A restarted process must not come back within `maxDriftMs` of its predecessor's last ID.
 * @throws ConfigurationError when neither is set or the id does not fit the worker bits.
 * @example
 * ```ts
 * import { InProcessSource, workerFromEnvironment, type Sharding } from '@shardflake/core'
 * declare const sharding: Sharding
 *
 * const source = new InProcessSource({ sharding, worker: workerFromEnvironment(sharding) })
 * ```
 */
export function workerFromEnvironment(
  sharding: Sharding,
  env: Readonly<Record<string, string | undefined>> = globalThis.process?.env ?? {},
): number {
  const { layout } = sharding
  const explicit = env.SHARDFLAKE_WORKER
  const ordinal = /-(\d+)$/.exec(env.HOSTNAME ?? '')?.[1]
  const text = explicit ?? ordinal
  const from = explicit !== undefined ? 'SHARDFLAKE_WORKER' : 'the StatefulSet ordinal in HOSTNAME'
  if (text === undefined) {
    throw new ConfigurationError(
      'No worker id in the environment: set SHARDFLAKE_WORKER, or run as a StatefulSet pod (HOSTNAME ends in -<ordinal>), or lease one with LeasedSource.',
    )
  }
  const worker = /^\d{1,10}$/.test(text) ? Number(text) : Number.NaN
  if (!Number.isSafeInteger(worker) || worker >= layout.workerCount) {
    throw new ConfigurationError(
      `Worker ${JSON.stringify(text)} from ${from} does not fit the ${layout.workerBits} worker bits of layout ${JSON.stringify(layout.name)} (0 to ${layout.workerCount - 1}). Ids are never masked: two processes would share one.`,
    )
  }
  return worker
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
export async function registryCall<T>(command: () => Promise<T>): Promise<T> {
  try {
    return await command()
  } catch (error) {
    if (error instanceof ShardflakeError) throw error
    throw new SourceUnavailableError(
      `The lease registry could not be reached or refused the call: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    )
  }
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
