import {
  ClockMovedBackwardsError,
  ConfigurationError,
  checkCount,
  type IdSource,
  InvalidLayoutError,
  type Layout,
  resolveLogicalShards,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '@shardflake/core'
import { Redis, type RedisOptions } from 'ioredis'
import { ID_SCRIPT, ID_SCRIPT_SHA } from './script'

/** A Redis server for {@link RedisSource}: a `redis://` URL (the source owns that client) or a client. */
export type RedisServerInput = string | Redis

/** What {@link RedisSource} takes. */
export interface RedisSourceOptions {
  /** The layout of the IDs. Decode-only presets are refused. */
  layout: Layout
  /**
   * One Redis server, or several independent ones (not replicas of each other). **Their order is
   * part of the configuration**: the server at index `k` hands out only sequence counters
   * `≡ k (mod servers.length)` (the classic per-server offsets and step), or, when the layout has worker bits,
   * writes `k` into the worker field. Every application process must list the same servers in
   * the same order under the same `keyPrefix`; a server refuses a different configuration with
   * `ConfigurationError`.
   *
   * URLs get a client made with {@link recommendedRedisOptions}, closed by `close()`. Clients you
   * pass are yours to close; give them short timeouts too, or failover waits for them.
   */
  servers: RedisServerInput | readonly RedisServerInput[]
  /**
   * Prefix of the keys the source uses on every server: `<prefix>shard:<n>` (the last counter
   * of shard n) and `<prefix>meta` (the configuration stamp).
   * @default 'shardflake:'
   */
  keyPrefix?: string
  /** How many logical shards keys are reduced by. @default layout.shardCount */
  logicalShards?: number
  /**
   * How far ahead of the server's clock the time field may run, in ms. Past the per-ms capacity
   * of a shard the script borrows the next milliseconds instead of wrapping, up to this far; a
   * larger batch is served in several calls, waiting for the clock in between. The same allowance
   * absorbs small clock steps back, and it is the **restart floor**: a shard whose state Redis
   * lost (restart, eviction, FLUSHALL) starts again `maxDriftMs + 1` ms after the server's clock,
   * past every ID issued before the loss. All processes on one prefix must agree on it.
   * @default 10
   */
  maxDriftMs?: number
  /**
   * The longest one call waits in a row for the clock to catch up with the state. A server clock
   * that stepped back further than `maxDriftMs + maxWaitMs` makes calls throw
   * `ClockMovedBackwardsError` (no ID issued) until it has caught up.
   * @default 100
   */
  maxWaitMs?: number
  /**
   * Which server a call tries first. `'failover'` uses the first healthy server of the list (one
   * shard's IDs from one source then stay ascending), `'round-robin'` spreads calls over the
   * healthy servers. Either way a call that fails on one server is retried on the next.
   * @default 'failover'
   */
  strategy?: 'failover' | 'round-robin'
  /**
   * How long a server that failed a call is passed over while others are healthy, in ms.
   * @default 1000
   */
  retryAfterMs?: number
  /**
   * A clock (ms since 1970) the script uses **instead of the Redis server's `TIME`**. For tests
   * that step the clock; uniqueness never depends on it, only how close the time field is to the
   * real time. @default the server's TIME
   */
  clock?: () => number
  /** Waits `ms` milliseconds. Inject one with an injected clock. @default setTimeout */
  sleep?: (ms: number) => Promise<void>
  /**
   * A floor for a shard's IDs, asked once per shard before this source's first call for it:
   * typically the largest ID already stored for that shard (`SELECT max(id) ...`). Every ID the
   * source issues for the shard is then above it, even after Redis lost its state **and** the
   * server's clock stepped back across the restart. Return `undefined` when there is none.
   *
   * @example
   * ```ts
   * floorOf: async (shard) => (await db.maxIdOfShard(shard)) ?? undefined
   * ```
   */
  floorOf?: (shard: number) => bigint | undefined | Promise<bigint | undefined>
}

/** IDs with the server that issued each (see {@link RedisSource.nextIdsWithServer}). */
export interface ServedIds {
  /** The IDs, ascending. */
  ids: bigint[]
  /** `servers[i]` is the name of the server that issued `ids[i]`. */
  servers: string[]
}

/**
 * Options for clients the source creates from URLs: fail fast when a server is gone, so the call
 * moves on to the next server instead of queueing.
 */
export const recommendedRedisOptions: RedisOptions = {
  maxRetriesPerRequest: 0,
  commandTimeout: 2_000,
  connectTimeout: 2_000,
  retryStrategy: (times) => Math.min(times * 100, 2_000),
}

interface Server {
  readonly name: string
  readonly client: Redis
  readonly owned: boolean
  readonly stamp: string
  /** ARGV[2..8] of the script: step, offset, stamp, epoch, unit, 2^sequenceBits, drift. */
  readonly fixedArgs: readonly (string | number)[]
  readonly worker: bigint
  downUntil: number
}

interface Grant {
  first: number
  granted: number
  now: number
}

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
 *   `≡ k (mod N)`, so **each server gets 1/N of a shard's per-ms capacity** (1024/N IDs per ms;
 *   all servers together still 1024). With a layout that has worker bits, the server index goes
 *   into the worker field instead and each server gets the full capacity;
 * - a Redis restart (nothing on disk) loses the state: the shard then starts `maxDriftMs + 1` ms
 *   ahead of the server's clock, past every ID issued before, so it is safe as long as the
 *   server's clock did not step back across the restart. The source also sends the highest
 *   counter it has seen per shard, so its own IDs stay ahead even then, and `floorOf` lets you
 *   pass the highest stored ID.
 *
 * **Order**: one source's IDs of a shard ascend across calls and servers (the floor it sends).
 * Moving to a server whose clock is behind the last one costs a wait of the difference beyond
 * `maxDriftMs`; keep the servers' clocks within a few ms (NTP).
 *
 * **Failover**: a call that fails on one server (down, timeout, loading) moves on to the next
 * healthy one; {@link nextIdsWithServer} and {@link serverOf} tell which server issued an ID.
 *
 * **Cost**: one `EVALSHA` round trip per call, whatever the batch size (the script is loaded once
 * per server and reloaded on `NOSCRIPT`). Concurrent calls share the connection: ioredis writes
 * each call at once, without waiting for the replies of the others.
 *
 * @example
 * ```ts
 * import { instagram } from '@shardflake/core'
 * import { RedisSource } from '@shardflake/redis'
 *
 * const source = new RedisSource({
 *   layout: instagram,
 *   servers: ['redis://10.0.0.1:6379', 'redis://10.0.0.2:6379'],
 *   logicalShards: 2000,
 * })
 * const id = await source.nextId(1341)
 * const batch = await source.nextIds(1341, 500) // one round trip
 * const { ids, servers } = await source.nextIdsWithServer(1341, 10)
 * await source.close()
 * ```
 */
export class RedisSource implements IdSource {
  readonly layout: Layout
  readonly synchronous = false
  readonly logicalShards: number
  /** Names of the servers (`host:port`), in configuration order. */
  readonly serverNames: readonly string[]
  private readonly servers: readonly Server[]
  private readonly prefix: string
  private readonly metaKey: string
  private readonly shardKeys: string[] = []
  private readonly step: number
  private readonly span: number
  private readonly maxDriftUnits: number
  private readonly maxWaitMs: number
  private readonly strategy: 'failover' | 'round-robin'
  private readonly retryAfterMs: number
  private readonly clock: (() => number) | undefined
  private readonly sleep: (ms: number) => Promise<void>
  private readonly floorOf: RedisSourceOptions['floorOf']
  private readonly floorsAsked = new Map<number, Promise<void>>()
  /** Highest counter this source received per shard, sent as a floor with every call. */
  private readonly floors = new Map<number, number>()
  private readonly sequences: bigint[] | undefined
  private turn = 0
  private closed = false

  /**
   * @throws InvalidLayoutError for a decode-only layout, or one whose counters do not fit a Lua
   * number.
   * @throws ConfigurationError for bad options.
   */
  constructor(options: RedisSourceOptions) {
    const { layout } = options
    if (layout.decodeOnly) {
      throw new InvalidLayoutError(
        `Layout ${JSON.stringify(layout.name)} is for decoding other systems' IDs; define your own layout to generate.`,
      )
    }
    if (layout.order[0] !== 'time' || layout.order[3] !== 'sequence') {
      throw new InvalidLayoutError(
        'The Redis source needs the time as the highest field and the sequence as the lowest.',
      )
    }
    if (layout.timeBits + layout.sequenceBits > 52) {
      throw new InvalidLayoutError(
        `The Redis source counts time and sequence in one Lua number: timeBits + sequenceBits must be at most 52, got ${layout.timeBits + layout.sequenceBits}.`,
      )
    }
    this.layout = layout
    const inputs: readonly RedisServerInput[] = Array.isArray(options.servers)
      ? options.servers
      : [options.servers as RedisServerInput]
    if (inputs.length === 0) throw new ConfigurationError('servers must name at least one Redis.')
    const workerMode = layout.workerBits > 0
    if (workerMode && inputs.length > layout.workerCount) {
      throw new ConfigurationError(
        `Layout ${JSON.stringify(layout.name)} has ${layout.workerCount} workers, fewer than the ${inputs.length} servers.`,
      )
    }
    if (!workerMode && inputs.length > layout.maxSequence + 1) {
      throw new ConfigurationError(
        `${inputs.length} servers cannot share the ${layout.maxSequence + 1} sequence values of a tick.`,
      )
    }
    this.logicalShards = resolveLogicalShards(layout, options.logicalShards)
    const maxDriftMs = options.maxDriftMs ?? 10
    const maxWaitMs = options.maxWaitMs ?? 100
    const retryAfterMs = options.retryAfterMs ?? 1_000
    if (!(maxDriftMs >= 0) || !(maxWaitMs >= 0) || !(retryAfterMs >= 0)) {
      throw new ConfigurationError('maxDriftMs, maxWaitMs and retryAfterMs must be zero or more.')
    }
    const strategy = options.strategy ?? 'failover'
    if (strategy !== 'failover' && strategy !== 'round-robin') {
      throw new ConfigurationError(`strategy must be 'failover' or 'round-robin'.`)
    }
    this.prefix = options.keyPrefix ?? 'shardflake:'
    this.metaKey = `${this.prefix}meta`
    this.step = workerMode ? 1 : inputs.length
    this.span = layout.maxSequence + 1
    this.maxDriftUnits = Math.floor(maxDriftMs / layout.timeUnitMs)
    this.maxWaitMs = maxWaitMs
    this.strategy = strategy
    this.retryAfterMs = retryAfterMs
    this.clock = options.clock
    this.sleep = options.sleep ?? defaultSleep
    this.floorOf = options.floorOf
    this.sequences =
      layout.sequenceBits <= 16
        ? Array.from({ length: this.span }, (_, i) => BigInt(i) << layout.shifts.sequence)
        : undefined
    this.servers = inputs.map((input, index) => {
      const owned = typeof input === 'string'
      const client = owned ? new Redis(input, recommendedRedisOptions) : input
      // Connection errors reach the calls that fail (and trigger failover); without a listener
      // ioredis would print each reconnect attempt.
      if (owned) client.on('error', () => {})
      if (!owned && !(client instanceof Redis)) {
        throw new ConfigurationError('servers must be redis:// URLs or ioredis clients.')
      }
      const stamp = [
        'shardflake-v1',
        `epoch=${layout.epoch}`,
        `unit=${layout.timeUnitMs}`,
        `bits=${layout.timeBits}/${layout.shardBits}/${layout.workerBits}/${layout.sequenceBits}`,
        `drift=${this.maxDriftUnits}`,
        workerMode ? `worker=${index}` : `offset=${index}/${this.step}`,
      ].join(';')
      const { host, port, path } = client.options
      return {
        name: path ? String(path) : `${host ?? 'localhost'}:${port ?? 6379}`,
        client,
        owned,
        stamp,
        fixedArgs: [
          this.step,
          workerMode ? 0 : index,
          stamp,
          layout.epoch,
          layout.timeUnitMs,
          this.span,
          this.maxDriftUnits,
        ],
        worker: workerMode ? BigInt(index) << layout.shifts.worker : 0n,
        downUntil: 0,
      }
    })
    this.serverNames = this.servers.map((server) => server.name)
  }

  /** One new ID for `shard`. */
  async nextId(shard: number): Promise<bigint> {
    return (await this.take(shard, 1, false)).ids[0]!
  }

  /** `count` new ascending IDs for `shard`, in one round trip (while the shard has capacity). */
  async nextIds(shard: number, count: number): Promise<bigint[]> {
    checkCount(count)
    return (await this.take(shard, count, false)).ids
  }

  /** One new ID and the name of the server that issued it. */
  async nextIdWithServer(shard: number): Promise<{ id: bigint; server: string }> {
    const { ids, servers } = await this.take(shard, 1, true)
    return { id: ids[0]!, server: servers[0]! }
  }

  /**
   * Like {@link nextIds}, and says which server issued each ID (a batch can span two servers when
   * one fails between the calls of a large batch).
   */
  async nextIdsWithServer(shard: number, count: number): Promise<ServedIds> {
    checkCount(count)
    return this.take(shard, count, true)
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

  /** Closes the clients the source made from URLs. Clients passed in stay open. */
  async close(): Promise<void> {
    if (this.closed) return
    this.closed = true
    await Promise.all(
      this.servers
        .filter((server) => server.owned)
        .map(async (server) => {
          try {
            await server.client.quit()
          } catch {
            server.client.disconnect()
          }
        }),
    )
  }

  private async take(shard: number, count: number, withServers: boolean): Promise<ServedIds> {
    this.checkShard(shard)
    if (this.closed) throw new ConfigurationError('This RedisSource is closed.')
    if (this.floorOf) await this.askFloor(shard)
    const ids: bigint[] = []
    const servers: string[] = []
    let waited = 0
    let lastNow = Number.NaN
    while (ids.length < count) {
      const [server, grant] = await this.call(shard, count - ids.length)
      if (grant.granted > 0) {
        this.compose(shard, server, grant, ids)
        if (withServers) for (let i = 0; i < grant.granted; i++) servers.push(server.name)
        waited = 0
        continue
      }
      // Nothing issued: the state is more than maxDrift ahead of the clock (a burst past the
      // shard's capacity, a fresh state after a restart, or the clock stepped back).
      const needed = Math.floor(grant.first / this.span) - this.maxDriftUnits
      const waitMs = Math.max(1, (needed - grant.now) * this.layout.timeUnitMs)
      // A one-tick wait while the clock moves on is the shard's capacity being shared out (or a
      // fresh state's start): it does not count against maxWaitMs. Longer waits, or a clock that
      // stands still, do.
      const throttled = waitMs <= this.layout.timeUnitMs && grant.now !== lastNow
      lastNow = grant.now
      if (throttled) waited = 0
      else if (waited + waitMs > this.maxWaitMs) {
        const behindMs = (Math.floor(grant.first / this.span) - grant.now) * this.layout.timeUnitMs
        throw new ClockMovedBackwardsError(behindMs, this.maxWaitMs)
      }
      await this.sleep(waitMs)
      waited += waitMs
    }
    return { ids, servers }
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

  private checkShard(shard: number): void {
    this.layout.checkShard(shard)
    if (shard >= this.logicalShards) {
      throw new ShardOutOfRangeError(
        shard,
        `Shard ${shard} is outside the ${this.logicalShards} logical shards of this source.`,
      )
    }
  }

  private compose(shard: number, server: Server, grant: Grant, into: bigint[]): void {
    const { layout, span, step, sequences } = this
    const shardPart = (BigInt(shard) << layout.shifts.shard) | server.worker
    const last = grant.first + (grant.granted - 1) * step
    layout.checkTime(Math.floor(last / span))
    let time = -1
    let base = 0n
    for (let counter = grant.first; counter <= last; counter += step) {
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

  /** Runs the script for `count` IDs on the first server that answers. */
  private async call(shard: number, count: number): Promise<[Server, Grant]> {
    const order = this.order()
    const failures: string[] = []
    let lastError: unknown
    for (const server of order) {
      try {
        return [server, await this.run(server, shard, count)]
      } catch (error) {
        if (isConfigError(error)) {
          const stamp = String((error as Error).message).slice('SHARDFLAKE_CONFIG '.length)
          throw new ConfigurationError(
            `Redis ${server.name} already serves prefix ${JSON.stringify(this.prefix)} with another configuration (${stamp}; this source: ${server.stamp}). Every process must use the same layout, maxDriftMs and server list in the same order; use another keyPrefix for another configuration.`,
          )
        }
        server.downUntil = Date.now() + this.retryAfterMs
        failures.push(`${server.name}: ${(error as Error)?.message ?? String(error)}`)
        lastError = error
      }
    }
    throw new SourceUnavailableError(
      `No Redis server could issue IDs for shard ${shard}. ${failures.join('; ')}`,
      { cause: lastError },
    )
  }

  /** Healthy servers first (in strategy order), then the rest. */
  private order(): readonly Server[] {
    const { servers } = this
    if (servers.length === 1) return servers
    let start = 0
    if (this.strategy === 'round-robin') {
      start = this.turn
      this.turn = (this.turn + 1) % servers.length
    }
    const now = Date.now()
    const healthy: Server[] = []
    const others: Server[] = []
    for (let i = 0; i < servers.length; i++) {
      const server = servers[(start + i) % servers.length]!
      if (server.client.status === 'ready' && server.downUntil <= now) healthy.push(server)
      else others.push(server)
    }
    return healthy.concat(others)
  }

  private async run(server: Server, shard: number, count: number): Promise<Grant> {
    let key = this.shardKeys[shard]
    if (key === undefined) {
      key = `${this.prefix}shard:${shard}`
      this.shardKeys[shard] = key
    }
    const args = [
      ID_SCRIPT_SHA,
      2,
      key,
      this.metaKey,
      count,
      ...server.fixedArgs,
      this.floors.get(shard) ?? -1,
      this.clock ? String(Math.floor(this.clock())) : '',
    ] as const
    let reply: unknown
    try {
      reply = await server.client.evalsha(...args)
    } catch (error) {
      if (!String((error as Error)?.message).startsWith('NOSCRIPT')) throw error
      await server.client.script('LOAD', ID_SCRIPT)
      reply = await server.client.evalsha(...args)
    }
    const [first, granted, now] = reply as [number, number, number]
    return { first, granted, now }
  }
}

function isConfigError(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('SHARDFLAKE_CONFIG ')
}
