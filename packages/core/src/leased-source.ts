import { ClockMovedBackwardsError, ConfigurationError, LeaseExpiredError } from './errors'
import { checkCount, type SyncIdSource } from './id-source'
import { InProcessSource } from './in-process-source'
import type { LeaseRegistry, WorkerLease } from './lease-registry'
import type { Sharding } from './sharding'
import { readDuration } from './source-options'

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
      // Another holder has the worker now (or the registry lost it): take a new lease.
      if (error instanceof LeaseExpiredError && !this.closed) await this.switchLease()
    }
  }

  /**
   * Takes a new lease and a generator for it. Never throws: a failure is kept for the next
   * `LeaseExpiredError`, and the old generator stays stopped at its mark meanwhile.
   */
  private async switchLease(): Promise<void> {
    const { registry } = this.options
    let next: Awaited<ReturnType<typeof acquire>> | undefined
    try {
      next = await acquire(this.options)
      if (this.closed) throw new ConfigurationError('closed while taking a new lease')
      const sameWorker = next.lease.worker === this.current.worker
      if (sameWorker) this.generator.close()
      // Another source of this process may still hold the new worker (a registry that lost its
      // data grants it again): the claim refuses it, and the lease goes back.
      const generator = this.generatorFor(next.lease)
      if (!sameWorker) this.generator.close()
      this.generator = generator
      this.current = next.lease
      this.highWaterMs = next.highWaterMs
      this.highWaterTime = this.toTime(next.highWaterMs)
    } catch (failure) {
      this.lastFailure = failure
      if (next) await registry.release(next.lease, next.lease.startAfterMs).catch(() => undefined)
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
