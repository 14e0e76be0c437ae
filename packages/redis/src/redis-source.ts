import {
  CancelledError,
  ClockMovedBackwardsError,
  checkCount,
  type IdRequestContext,
  type IdSource,
  type Layout,
  RunningCalls,
  type Sharding,
  ShardOverloadedError,
} from '@shardflake/core'
import {
  type RedisSourceOptions,
  type ResolvedOptions,
  resolveOptions,
  type ServedIds,
} from './options'
import { ScriptStatus } from './script'
import type { Server } from './server'
import { ServerSet } from './server-set'

const defaultSleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/**
 * IDs from one or more Redis servers, made by a Lua script: the well-known Redis + Lua generator
 * (server time, shard, per-shard counter with per-server offsets and a step) without its clock
 * hazard. Needs Redis 6.2 or later (7 recommended), no modules, no persistence.
 *
 * **Never the same ID twice.** Per shard the script keeps the last issued (time, sequence) as one
 * counter in "ID space" and issues `max(clock, last + 1)` atomically, so:
 * - past 1024 IDs in one ms (Instagram layout) it borrows the next ms instead of wrapping, at most
 *   `maxDriftMs` ahead of the clock, then callers wait for the clock;
 * - when the server's clock steps back the time field stands still (IDs continue from the last),
 *   and calls wait, then throw `ClockMovedBackwardsError` past `maxDriftMs + maxWaitMs`;
 * - several independent servers never meet: the server at index k of N issues only counters
 *   `≡ k (mod N)`, so **each server gets 1/N of a shard's per-ms capacity**. With a layout that
 *   has worker bits, the server index goes into the worker field instead;
 * - a Redis restart (nothing on disk) loses the state: the shard then starts `maxDriftMs + 1` ms
 *   ahead of the server's clock, past every ID issued before. The source also sends the highest
 *   counter it has seen per shard, and `floorOf` lets you pass the highest stored ID.
 *
 * **Failover**: a call that fails on one server (down, no answer within `timeoutMs`, loading)
 * moves on to the next; {@link nextIdsWithServer} and {@link serverOf} tell which server issued
 * an ID. **Cost**: one `EVALSHA` round trip per call, whatever the batch size.
 *
 * **Closing**: {@link close} ends the calls still running at once (`CancelledError`) and returns
 * within `timeoutMs`, also when a server stopped answering.
 *
 * @example
 * ```ts
 * import { defineSharding, instagram } from '@shardflake/core'
 * import { RedisSource } from '@shardflake/redis'
 *
 * const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })
 * const source = new RedisSource({
 *   sharding,
 *   servers: ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379'],
 * })
 * const id = await source.nextId(sharding.shardForKey(31341n))
 * const batch = await source.nextIds(1341, 500) // one round trip
 * await source.close()
 * ```
 */
export class RedisSource implements IdSource {
  readonly sharding: Sharding
  readonly synchronous = false
  /** Names of the servers (`host:port`), in configuration order. */
  readonly serverNames: readonly string[]
  private readonly layout: Layout
  private readonly config: ResolvedOptions
  private readonly set: ServerSet
  private readonly step: number
  private readonly span: number
  private readonly maxDriftUnits: number
  private readonly clock: (() => number) | undefined
  private readonly sleep: (ms: number) => Promise<void>
  private readonly floorOf: RedisSourceOptions['floorOf']
  private readonly floorsAsked = new Map<number, Promise<void>>()
  /** Highest counter this source received per shard, sent as a floor with every call. */
  private readonly floors = new Map<number, number>()
  private readonly sequences: bigint[] | undefined
  private readonly calls = new RunningCalls('RedisSource')
  private closing: Promise<void> | undefined

  /**
   * @throws ConfigurationError naming `logicalShards` without a sharding, or for bad options.
   * @throws InvalidLayoutError for a decode-only layout, or one whose counters do not fit a Lua
   * number.
   * @throws TimeExhaustedError for a layout whose time field is used up.
   * @throws InvalidArgumentError for a duration outside its bounds.
   */
  constructor(options: RedisSourceOptions) {
    this.config = resolveOptions(options)
    const { sharding, layout } = this.config
    this.sharding = sharding
    this.layout = layout
    this.step = this.config.workerMode ? 1 : this.config.inputs.length
    this.span = layout.maxSequence + 1
    this.maxDriftUnits = Math.floor(this.config.maxDriftMs / layout.timeUnitMs)
    this.clock = options.clock
    this.sleep = options.sleep ?? defaultSleep
    this.floorOf = options.floorOf
    this.sequences =
      layout.sequenceBits <= 16
        ? Array.from({ length: this.span }, (_, i) => BigInt(i) << layout.shifts.sequence)
        : undefined
    this.set = new ServerSet(this.config)
    this.serverNames = this.set.servers.map((server) => server.name)
  }

  /** One new ID for `shard`. */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    return (await this.take(shard, 1, false, context)).ids[0]!
  }

  /** `count` new ascending IDs for `shard`, in one round trip (while the shard has capacity). */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    return (await this.take(shard, count, false, context)).ids
  }

  /** One new ID and the name of the server that issued it. */
  async nextIdWithServer(
    shard: number,
    context?: IdRequestContext,
  ): Promise<{ id: bigint; server: string }> {
    const { ids, servers } = await this.take(shard, 1, true, context)
    return { id: ids[0]!, server: servers[0]! }
  }

  /**
   * Like {@link nextIds}, and says which server issued each ID (a batch can span two servers when
   * one fails between the calls of a large batch).
   */
  async nextIdsWithServer(
    shard: number,
    count: number,
    context?: IdRequestContext,
  ): Promise<ServedIds> {
    checkCount(count)
    return this.take(shard, count, true, context)
  }

  /**
   * The index (in `servers`) of the server that issued an ID of this source's configuration:
   * the sequence counter's residue, or the worker field.
   */
  serverOf(id: bigint | string): number {
    const decoded = this.layout.decompose(id)
    if (this.layout.workerBits > 0) return decoded.worker
    return (decoded.time * this.span + decoded.sequence) % this.step
  }

  /**
   * Ends the calls still running at once (`CancelledError`, nothing issued to them) and closes
   * the clients the source made from URLs: each with QUIT, disconnected when a server has not
   * answered within `timeoutMs`. Clients passed in stay open. Safe to call twice.
   */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.calls.close()
      await this.set.close()
    })()
    return this.closing
  }

  private take(
    shard: number,
    count: number,
    withServers: boolean,
    context: IdRequestContext | undefined,
  ): Promise<ServedIds> {
    try {
      this.sharding.checkShard(shard)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.calls.run(`nextIds of shard ${shard}`, context?.signal, (signal) =>
      this.draw(shard, count, withServers, signal),
    )
  }

  private async draw(
    shard: number,
    count: number,
    withServers: boolean,
    signal: AbortSignal,
  ): Promise<ServedIds> {
    if (this.floorOf) await this.askFloor(shard)
    const ids: bigint[] = []
    const servers: string[] = []
    const unit = this.layout.timeUnitMs
    // Waits in a row without an ID: for capacity (the drift allowance used up), and for a clock
    // behind the state. Each is bounded by maxWaitMs; capacity gets one tick more, so a fresh
    // shard (which starts at the top of its allowance) is served even with maxWaitMs 0.
    let fullWaited = 0
    let behindWaited = 0
    while (ids.length < count) {
      const [server, reply] = await this.set.run({
        shard,
        count: count - ids.length,
        floor: this.floors.get(shard) ?? -1,
        clock: this.clock,
        signal,
      })
      const { status, first, now } = reply
      if (status === ScriptStatus.GRANTED) {
        this.compose(shard, server, first, reply.granted, ids)
        if (withServers) for (let i = 0; i < reply.granted; i++) servers.push(server.name)
        fullWaited = 0
        behindWaited = 0
        continue
      }
      const firstTime = Math.floor(first / this.span)
      if (status === ScriptStatus.EXHAUSTED) {
        this.layout.checkTime(Math.max(firstTime, this.layout.timeLimit))
      }
      const waitMs = Math.max(1, firstTime - this.maxDriftUnits - now) * unit
      if (status === ScriptStatus.FULL) {
        if (fullWaited + waitMs > this.config.maxWaitMs + unit) throw this.overloaded(shard)
        fullWaited += waitMs
      } else {
        if (behindWaited + waitMs > this.config.maxWaitMs) {
          throw new ClockMovedBackwardsError((firstTime - now) * unit, this.config.maxWaitMs)
        }
        behindWaited += waitMs
      }
      await this.pause(waitMs, signal)
    }
    return { ids, servers }
  }

  private overloaded(shard: number): ShardOverloadedError {
    const { maxDriftMs, maxWaitMs } = this.config
    return new ShardOverloadedError(
      `Shard ${shard} was asked for more IDs than it makes within its ${maxDriftMs} ms drift allowance (${Math.floor(this.layout.capacityPerMs / this.step)} per ms from each server) and the ${maxWaitMs} ms a call may wait: other callers kept using its capacity up. The clock is fine; no ID was returned (any reserved for this call are dropped, never issued twice). Ask for fewer IDs per call, spread rows over more shards, or raise maxWaitMs or maxDriftMs.`,
    )
  }

  private async pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
    await this.sleep(ms)
    if (signal?.aborted) {
      throw new CancelledError('The call to RedisSource was cancelled by the caller.', {
        cause: signal.reason,
      })
    }
  }

  /** Reads the caller's floor for `shard` once and raises the shard's floor to it. */
  private askFloor(shard: number): Promise<void> {
    let asked = this.floorsAsked.get(shard)
    if (!asked) {
      asked = (async () => {
        const id = await this.floorOf!(shard)
        if (id === undefined) return
        const { time, sequence } = this.layout.decompose(id)
        const counter = time * this.span + sequence
        if (counter > (this.floors.get(shard) ?? -1)) this.floors.set(shard, counter)
      })()
      this.floorsAsked.set(shard, asked)
      asked.catch(() => this.floorsAsked.delete(shard))
    }
    return asked
  }

  private compose(
    shard: number,
    server: Server,
    first: number,
    granted: number,
    into: bigint[],
  ): void {
    const { layout, span, step, sequences } = this
    const shardPart = (BigInt(shard) << layout.shifts.shard) | server.worker
    const last = first + (granted - 1) * step
    let time = -1
    let base = 0n
    for (let counter = first; counter <= last; counter += step) {
      const t = Math.floor(counter / span)
      if (t !== time) {
        time = t
        base = (BigInt(t) << layout.shifts.time) | shardPart
        if (base >= 1n << 63n) base -= 1n << 64n
      }
      const sequence = counter - t * span
      into.push(base + (sequences ? sequences[sequence]! : BigInt(sequence)))
    }
    if (last > (this.floors.get(shard) ?? -1)) this.floors.set(shard, last)
  }
}
