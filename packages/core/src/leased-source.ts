import {
  ClockMovedBackwardsError,
  ConfigurationError,
  InvalidArgumentError,
  LeaseExpiredError,
} from './errors'
import { checkContext, checkCount, type IdRequestContext, type SyncIdSource } from './id-source'
import { InProcessSource } from './in-process-source'
import { checkKnownOptions } from './known-options'
import { LEASE_DEFAULTS, type LeaseRegistry, type WorkerLease } from './lease-registry'
import { requireSharding, type Sharding } from './sharding'
import { readDuration } from './source-options'

/** What {@link LeasedSource.start} takes. */
export interface LeasedSourceOptions {
  /** The application's sharding. Its layout needs worker bits: each process leases one worker. */
  readonly sharding: Sharding
  readonly registry: LeaseRegistry
  /** @default `<hostname>:<pid>` */
  readonly holder?: string
  /**
   * How long a lease lasts without renewal, in ms, at most the registry's `maxTtlMs`. The source
   * renews a third of it after each renewal was sent and stops issuing a fifth of it before the
   * lease could have expired; a dead process's worker is free again after it.
   * @default 10000
   */
  readonly ttlMs?: number
  /**
   * How long `start` may wait for its clock to pass the previous holder's high-water mark, in ms;
   * the wait applied is at most half of `ttlMs`. `start` takes a worker it can start on within
   * that wait when the registry has one, and refuses with `ClockMovedBackwardsError` otherwise.
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

const KNOWN_OPTIONS = [
  'sharding',
  'registry',
  'holder',
  'ttlMs',
  'maxStartWaitMs',
  'maxDriftMs',
  'maxWaitMs',
  'clock',
  'sleep',
] as const

interface Settings {
  readonly sharding: Sharding
  readonly registry: LeaseRegistry
  readonly holder: string
  readonly holderId: string
  readonly ttlMs: number
  readonly maxStartWaitMs: number
  readonly maxDriftMs: number
  readonly maxWaitMs: number
  readonly clock: () => number
  readonly sleep: (ms: number) => Promise<void>
}

/** A lease as taken: the mark recorded for it, and when the request that recorded it was sent. */
interface Taken {
  readonly lease: WorkerLease
  readonly highWaterMs: number
  /** This clock when the grant or renewal that recorded `highWaterMs` was sent. */
  readonly sentAt: number
}

/**
 * The in-process generator with a leased worker id: ~1M IDs per second per shard, synchronous,
 * and safe across processes, restarts and replicas without configuring anything per process.
 *
 * - Each process leases one **worker** from a registry on a server it already runs, so any
 *   process can make IDs for any shard: placement never depends on which process writes the row.
 * - It renews in the background and **fails closed**: it never puts a time into an ID beyond the
 *   high-water mark its last renewal recorded, a fifth of the TTL before the lease could expire
 *   (counted from when the renewal was sent); past it, `nextId` throws `LeaseExpiredError`
 *   instead of risking a repeat.
 * - Each lease records, ahead of use, the highest time its holder may issue. The next holder of
 *   the worker (after a crash, or another process after the TTL) starts above it, even when its
 *   clock is behind.
 * - Every registry call is bounded by the registry's `timeoutMs`; `close()` releases the worker
 *   and returns within that bound even when the registry does not answer.
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
  /** This clock when the last successful grant or renewal was sent. */
  private sentAt: number
  private timer: ReturnType<typeof setTimeout> | undefined
  private renewing: Promise<void> | undefined
  private closed = false
  private lastFailure: unknown

  private constructor(
    private readonly options: Settings,
    taken: Taken,
  ) {
    this.sharding = options.sharding
    this.current = taken.lease
    this.highWaterMs = taken.highWaterMs
    this.highWaterTime = this.toTime(taken.highWaterMs)
    this.sentAt = taken.sentAt
    this.generator = this.generatorFor(taken.lease)
    this.scheduleRenewal()
  }

  /**
   * Leases a worker and returns a source that makes IDs with it.
   * @throws NoFreeLeaseError when every worker is held (or the registry waits after losing data).
   * @throws ClockMovedBackwardsError when every worker the registry could grant has a previous
   * high-water mark further ahead of this clock than the wait allowed (`maxStartWaitMs`, at most
   * half of `ttlMs`).
   * @throws TimedOutError when the registry does not answer within its `timeoutMs`.
   * @throws ConfigurationError for a layout without worker bits, or a `ttlMs` above the
   * registry's `maxTtlMs`; InvalidArgumentError for unknown options or values out of bounds.
   */
  static async start(options: LeasedSourceOptions): Promise<LeasedSource> {
    const settings = readOptions(options)
    const taken = await acquire(settings)
    try {
      return new LeasedSource(settings, taken)
    } catch (error) {
      // Another source of this process makes IDs with that worker (ShardConflictError).
      const { lease } = taken
      await settings.registry.release(lease, lease.startAfterMs).catch(() => undefined)
      throw error
    }
  }

  /** The lease in use now (it changes when the source had to take a new one). */
  get lease(): WorkerLease {
    return this.current
  }

  nextId(shard: number, context?: IdRequestContext): bigint {
    if (context !== undefined) checkContext(context, 'LeasedSource.nextId')
    this.check()
    return this.generator.nextId(shard)
  }

  nextIds(shard: number, count: number, context?: IdRequestContext): bigint[] {
    checkCount(count)
    if (context !== undefined) checkContext(context, 'LeasedSource.nextIds')
    this.check()
    return this.generator.nextIds(shard, count)
  }

  /**
   * IDs ascending in row order, as {@link InProcessSource.nextIdsAscending}, within this lease's
   * high-water mark; `undefined` (nothing issued) when the batch does not fit the drift window.
   * Use {@link allocateAscending}.
   */
  nextIdsAscending(
    shards: readonly number[],
    maxLagMs?: number,
    groups?: readonly unknown[],
  ): bigint[] | undefined {
    this.check()
    return this.generator.nextIdsAscending(shards, maxLagMs, groups)
  }

  /**
   * Stops renewing and releases the worker, so another process may take it at once. Returns
   * within the registry's `timeoutMs` (default 2 s) even when the registry does not answer: the
   * release is then lost, and the next holder of the worker waits for the lease's TTL and starts
   * above the mark reserved ahead, never below what was issued.
   */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    clearTimeout(this.timer)
    // Record what was really issued, never below where this lease started: the next holder need
    // not wait for the reserve, and still starts above every ID of every holder before.
    const issued = Math.max(this.generator.lastIssuedMs(), this.current.startAfterMs)
    this.generator.close()
    await this.options.registry.release(this.current, issued).catch(() => undefined)
  }

  /** Renews now (the source does this a third of the TTL after each renewal was sent). */
  renew(): Promise<void> {
    this.renewing ??= this.renewOnce().finally(() => {
      this.renewing = undefined
      this.scheduleRenewal()
    })
    return this.renewing
  }

  /**
   * Schedules the next renewal a third of the TTL after the last successful one was sent (at
   * once when that is past, as after a slow grant), or a sixth of the TTL after a failed one.
   */
  private scheduleRenewal(): void {
    if (this.closed) return
    clearTimeout(this.timer)
    const { ttlMs, clock } = this.options
    const due = this.lastFailure ? ttlMs / 6 : Math.max(0, this.sentAt + ttlMs / 3 - clock())
    this.timer = setTimeout(() => void this.renew(), Math.min(due, ttlMs))
    this.timer.unref?.()
  }

  private async renewOnce(): Promise<void> {
    if (this.closed) return
    const { registry, clock, ttlMs } = this.options
    const sentAt = clock()
    const highWaterMs = Math.max(this.highWaterMs, markFrom(sentAt, ttlMs))
    try {
      await registry.renew(this.current, highWaterMs)
      this.highWaterMs = highWaterMs
      this.highWaterTime = this.toTime(highWaterMs)
      this.sentAt = sentAt
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
    let next: Taken | undefined
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
      this.sentAt = next.sentAt
      this.lastFailure = undefined
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

function readOptions(options: LeasedSourceOptions): Settings {
  checkKnownOptions('LeasedSource.start() options', options, KNOWN_OPTIONS)
  const sharding = requireSharding(options.sharding, 'LeasedSource')
  const { registry } = options
  if (
    typeof registry !== 'object' ||
    registry === null ||
    typeof registry.acquire !== 'function' ||
    typeof registry.maxTtlMs !== 'number'
  ) {
    throw new ConfigurationError(
      'LeasedSource needs a lease registry: pass registry: new PostgresLeaseRegistry(pool) (or MysqlLeaseRegistry, RedisLeaseRegistry, MemoryLeaseRegistry).',
    )
  }
  if (sharding.layout.workerBits === 0) {
    throw new ConfigurationError(
      `A leased source leases a worker id, and layout ${JSON.stringify(sharding.layout.name)} has no worker bits. Define a layout with workerBits (for example 13 shard, 4 worker, 6 sequence bits) so any process can make IDs for any shard.`,
    )
  }
  sharding.layout.checkGenerating()
  const ttlMs = readDuration('ttlMs', options.ttlMs, LEASE_DEFAULTS.ttlMs, {
    min: 100,
    max: 600_000,
  })
  if (ttlMs > registry.maxTtlMs) {
    throw new ConfigurationError(
      `ttlMs ${ttlMs} is above the registry's maxTtlMs ${registry.maxTtlMs}. A registry that lost its data waits maxTtlMs before granting again, and that wait must cover every holder's TTL: lower ttlMs, or raise maxTtlMs to ${ttlMs} or more on every registry object and in the registry (shardflake leases --max-ttl ${ttlMs}).`,
    )
  }
  if (options.holder !== undefined && typeof options.holder !== 'string') {
    throw new InvalidArgumentError('holder must be a string (a host name and process id).')
  }
  for (const name of ['clock', 'sleep'] as const) {
    if (options[name] !== undefined && typeof options[name] !== 'function') {
      throw new InvalidArgumentError(`${name} must be a function.`)
    }
  }
  return {
    sharding,
    registry,
    holder: options.holder ?? defaultHolder(),
    holderId: randomId(),
    ttlMs,
    maxStartWaitMs: readDuration('maxStartWaitMs', options.maxStartWaitMs, 2000, {
      max: 600_000,
    }),
    maxDriftMs: readDuration('maxDriftMs', options.maxDriftMs, 10),
    maxWaitMs: readDuration('maxWaitMs', options.maxWaitMs, 100, { max: 60_000 }),
    clock: options.clock ?? Date.now,
    sleep:
      options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))),
  }
}

async function acquire(settings: Settings): Promise<Taken> {
  const { registry, sharding, holder, holderId, ttlMs, maxDriftMs, clock } = settings
  // Never wait so long that the fresh lease could lapse before it is renewed below.
  const limit = Math.min(settings.maxStartWaitMs, Math.floor(ttlMs / 2))
  const sentAt = clock()
  const highWaterMs = markFrom(sentAt, ttlMs)
  const lease = await registry.acquire({
    sharding,
    holder,
    holderId,
    ttlMs,
    highWaterMs,
    startByMs: sentAt + maxDriftMs + limit,
  })
  // The previous holder may have issued up to its high-water mark: wait for this clock to pass it.
  const now = clock()
  const behind = lease.startAfterMs - maxDriftMs - now
  if (behind <= 0) return { lease, highWaterMs, sentAt }
  if (behind > limit) {
    await registry.release(lease, lease.startAfterMs).catch(() => undefined)
    throw startRefused(lease, behind, limit, settings, now)
  }
  try {
    await settings.sleep(behind + 1)
    // Raise the mark so that this holder has a full TTL of room above it.
    const renewedAt = clock()
    const recorded = Math.max(highWaterMs, markFrom(renewedAt, ttlMs))
    await registry.renew(lease, recorded)
    return { lease, highWaterMs: recorded, sentAt: renewedAt }
  } catch (error) {
    await registry.release(lease, lease.startAfterMs).catch(() => undefined)
    throw error
  }
}

/**
 * Why `start` refused: the previous mark is ahead of the registry's clock too (a holder freed
 * while its mark was ahead, or whose clock ran ahead), or only ahead of this clock.
 */
function startRefused(
  lease: WorkerLease,
  behindMs: number,
  limitMs: number,
  settings: Settings,
  now: number,
): ClockMovedBackwardsError {
  const { maxStartWaitMs, ttlMs } = settings
  const mark = new Date(lease.startAfterMs).toISOString()
  const applied =
    limitMs < maxStartWaitMs
      ? `the ${limitMs} ms start() may wait (maxStartWaitMs ${maxStartWaitMs}, at most half of ttlMs ${ttlMs})`
      : `the ${limitMs} ms start() may wait (maxStartWaitMs)`
  const aheadOfRegistry = lease.startAfterMs - settings.maxDriftMs - lease.grantedAtMs
  const message =
    aheadOfRegistry > limitMs
      ? `Every worker the registry could grant has a previous holder's high-water mark ahead. Worker ${lease.worker}, the one it offered, has ${mark}, ${Math.round(aheadOfRegistry)} ms ahead of the registry's clock as well: its holder was freed while its mark was still ahead, or its clock ran ahead. Waiting for it is more than ${applied}. This clock is not at fault; no ID was issued. Retry after ${mark}, or raise maxStartWaitMs.`
      : `This clock is ${Math.round(behindMs)} ms behind the high-water mark ${mark} that the previous holder of worker ${lease.worker} recorded (the registry's clock read ${new Date(lease.grantedAtMs).toISOString()} when it granted, this clock ${new Date(now).toISOString()}): more than ${applied}. No ID was issued. Fix this clock (NTP slew, not step), or raise maxStartWaitMs.`
  return new ClockMovedBackwardsError(Math.round(behindMs), limitMs, { message })
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

/** A random id for a started source (128 bits, hex). */
function randomId(): string {
  const bytes = new Uint8Array(16)
  globalThis.crypto.getRandomValues(bytes)
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')
}
