import {
  ConfigurationError,
  type ShardflakeError,
  type ShardingDescription,
  ShardingMismatchError,
  SourceUnavailableError,
  withDeadline,
} from '@shardflake/core'
import { Redis } from 'ioredis'
import { translateRedisError } from './errors'
import { type ResolvedOptions, recommendedRedisOptions } from './options'
import {
  configStamp,
  type GrantReply,
  ID_SCRIPT,
  ID_SCRIPT_SHA,
  readReply,
  type ScriptReply,
  shardingPart,
  stampSharding,
} from './script'

/** One server of a {@link ServerSet}. */
export interface Server {
  readonly name: string
  readonly client: Redis
  readonly owned: boolean
  readonly stamp: string
  /** ARGV[2..8] of the script: step, offset, stamp, epoch, unit, 2^sequenceBits, drift. */
  readonly fixedArgs: readonly (string | number)[]
  /** The server's index in the worker field (0 in offset mode), shifted into place. */
  readonly worker: bigint
  /** Until when (ms since 1970) the server is passed over after a failure. */
  downUntil: number
  /** The last connection error the client reported since it was last ready. */
  socketError: unknown
  /** The sharding check on this server, once it passed. */
  shardingChecked: Promise<void> | undefined
}

/** What one script call takes besides the server. */
export interface ScriptCall {
  readonly shard: number
  readonly count: number
  readonly floor: number
  readonly clock: (() => number) | undefined
  readonly signal: AbortSignal | undefined
}

/**
 * The servers of a `RedisSource`: their clients, which to try first, and failover. Each attempt
 * runs under `timeoutMs`; a server that fails or does not answer in time is passed over for
 * `retryAfterMs` and the next one is tried.
 */
export class ServerSet {
  readonly servers: readonly Server[]
  private readonly shardKeys: string[] = []
  private readonly metaKey: string
  private readonly shardingKey: string
  private readonly shardingJson: string
  private readonly timeLimitArg: number
  private turn = 0
  private allChecked: Promise<void> | undefined

  constructor(private readonly config: ResolvedOptions) {
    const { layout, sharding, inputs, prefix, workerMode, timeoutMs } = config
    this.metaKey = `${prefix}meta`
    this.shardingKey = `${prefix}sharding`
    this.shardingJson = JSON.stringify(sharding.toJSON())
    this.timeLimitArg = layout.timeLimit
    const step = workerMode ? 1 : inputs.length
    const driftUnits = Math.floor(config.maxDriftMs / layout.timeUnitMs)
    this.servers = inputs.map((input, index) => {
      const owned = typeof input === 'string'
      if (!owned && !(input instanceof Redis)) {
        throw new ConfigurationError('servers must be redis:// URLs or ioredis clients.')
      }
      const client = owned
        ? new Redis(input, {
            ...recommendedRedisOptions,
            commandTimeout: timeoutMs,
            connectTimeout: timeoutMs,
          })
        : input
      const stamp = configStamp(
        sharding,
        driftUnits,
        workerMode ? `worker=${index}` : `offset=${index}/${step}`,
      )
      const { host, port, path } = client.options
      const server: Server = {
        name: path ? String(path) : `${host ?? 'localhost'}:${port ?? 6379}`,
        client,
        owned,
        stamp,
        fixedArgs: [
          step,
          workerMode ? 0 : index,
          stamp,
          layout.epoch,
          layout.timeUnitMs,
          layout.maxSequence + 1,
          driftUnits,
        ],
        worker: workerMode ? BigInt(index) << layout.shifts.worker : 0n,
        downUntil: 0,
        socketError: undefined,
        shardingChecked: undefined,
      }
      // The last connection error tells a refused connection from a lost one; listening also
      // keeps ioredis from printing every reconnect attempt.
      client.on('error', (error: unknown) => {
        server.socketError = error
      })
      client.on('ready', () => {
        server.socketError = undefined
      })
      return server
    })
  }

  /**
   * Runs the script for `call.count` IDs on the first server that answers in time.
   * @throws ShardingMismatchError, ConfigurationError, CancelledError at once (no failover).
   * @throws SourceUnavailableError when every server failed; `cause` is the last failure.
   */
  async run(call: ScriptCall): Promise<[Server, GrantReply]> {
    this.allChecked ??= this.checkAll()
    // Shared by every call; bounded by timeoutMs itself. The caller's signal still ends the wait.
    const checked = this.allChecked
    await withDeadline(() => checked, {
      timeoutMs: this.config.timeoutMs * 2,
      signal: call.signal,
      what: 'the Redis servers',
    })
    const failures: string[] = []
    let last: ShardflakeError | undefined
    for (const server of this.order()) {
      try {
        const reply = await withDeadline(() => this.attempt(server, call), {
          timeoutMs: this.config.timeoutMs,
          signal: call.signal,
          what: `Redis ${server.name}`,
        })
        return [server, reply]
      } catch (error) {
        const failure = error as ShardflakeError
        if (!failure.retryable || failure.code === 'CANCELLED') throw failure
        server.downUntil = Date.now() + this.config.retryAfterMs
        failures.push(`${server.name}: ${failure.message}`)
        last = failure
      }
    }
    throw new SourceUnavailableError(
      `No Redis server could issue IDs for shard ${call.shard}. ${failures.join(' ')}`,
      { cause: last },
    )
  }

  /**
   * Records and compares the sharding on every server at once, so that a standby server with
   * another sharding is found before it is needed. A server that cannot be reached now is
   * checked when it is first used.
   * @throws ShardingMismatchError
   */
  private async checkAll(): Promise<void> {
    const results = await Promise.allSettled(
      this.servers.map((server) =>
        withDeadline(() => this.checkSharding(server), {
          timeoutMs: this.config.timeoutMs,
          what: `Redis ${server.name}`,
        }),
      ),
    )
    for (const result of results) {
      if (result.status === 'rejected' && result.reason instanceof ShardingMismatchError) {
        this.allChecked = undefined
        throw result.reason
      }
    }
  }

  /** Closes the clients made from URLs; clients passed in stay open. */
  async close(): Promise<void> {
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

  /** Healthy servers first (in strategy order), then the rest. */
  private order(): readonly Server[] {
    const { servers } = this
    if (servers.length === 1) return servers
    let start = 0
    if (this.config.strategy === 'round-robin') {
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

  /** One try on one server, every failure translated. */
  private async attempt(server: Server, call: ScriptCall): Promise<GrantReply> {
    const statusAtSend = server.client.status
    const started = Date.now()
    try {
      await this.checkSharding(server)
      const reply = await this.evaluate(server, call)
      if (reply.status === 4) throw this.stampError(server, reply.stamp)
      return reply
    } catch (error) {
      throw this.translate(server, statusAtSend, started, error)
    }
  }

  private translate(server: Server, statusAtSend: string, started: number, error: unknown) {
    return translateRedisError(error, {
      server: server.name,
      statusAtSend,
      status: server.client.status,
      socketError: server.socketError,
      elapsedMs: Date.now() - started,
      commandTimeoutMs: server.client.options.commandTimeout,
    })
  }

  /**
   * Records the sharding on the server if none is (SET NX), and compares what is recorded.
   * @throws ShardingMismatchError
   */
  private checkSharding(server: Server): Promise<void> {
    server.shardingChecked ??= (async () => {
      const statusAtSend = server.client.status
      const started = Date.now()
      let recorded: unknown
      try {
        const replies = await server.client
          .multi()
          .set(this.shardingKey, this.shardingJson, 'NX')
          .get(this.shardingKey)
          .exec()
        const [error, value] = replies?.[1] ?? [undefined, null]
        if (error) throw error
        recorded = value
      } catch (error) {
        throw this.translate(server, statusAtSend, started, error)
      }
      if (typeof recorded !== 'string') return
      let description: ShardingDescription
      try {
        description = JSON.parse(recorded) as ShardingDescription
      } catch (cause) {
        throw new ShardingMismatchError(
          `Redis ${server.name} holds ${this.shardingKey}, but not as a sharding description: another program uses keyPrefix ${JSON.stringify(this.config.prefix)}. Choose another keyPrefix.`,
          { cause },
        )
      }
      this.config.sharding.checkSame(
        description,
        `Redis ${server.name} (keyPrefix ${JSON.stringify(this.config.prefix)})`,
      )
    })()
    const checked = server.shardingChecked
    checked.catch(() => {
      if (server.shardingChecked === checked) server.shardingChecked = undefined
    })
    return checked
  }

  private async evaluate(server: Server, call: ScriptCall): Promise<ScriptReply> {
    const { shard } = call
    let key = this.shardKeys[shard]
    if (key === undefined) {
      key = `${this.config.prefix}shard:${shard}`
      this.shardKeys[shard] = key
    }
    const args = [
      ID_SCRIPT_SHA,
      3,
      key,
      this.metaKey,
      this.shardingKey,
      call.count,
      ...server.fixedArgs,
      call.floor,
      call.clock ? String(Math.floor(call.clock())) : '',
      this.timeLimitArg,
      this.shardingJson,
    ] as const
    try {
      return readReply(await server.client.evalsha(...args))
    } catch (error) {
      if (!isNoScript(error)) throw error
      await server.client.script('LOAD', ID_SCRIPT)
      return readReply(await server.client.evalsha(...args))
    }
  }

  private stampError(server: Server, recorded: string): ShardflakeError {
    const where = `Redis ${server.name} (keyPrefix ${JSON.stringify(this.config.prefix)})`
    if (stampSharding(recorded) !== shardingPart(this.config.sharding)) {
      return new ShardingMismatchError(
        `${where} serves another sharding (${stampSharding(recorded) ?? recorded}; this source: ${shardingPart(this.config.sharding)} as epoch,unit,bits,order,logicalShards). Keys would land on different shards depending on who writes the row: use one defineSharding({ layout, logicalShards }) everywhere, or another keyPrefix.`,
      )
    }
    return new ConfigurationError(
      `${where} already serves another configuration (${recorded}; this source: ${server.stamp}). Every process must use the same maxDriftMs and server list in the same order; use another keyPrefix for another configuration.`,
    )
  }
}

function isNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' && message.split(' ', 1)[0] === 'NOSCRIPT'
}
