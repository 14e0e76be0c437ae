import {
  ConfigurationError,
  Failover,
  type ShardflakeError,
  SourceUnavailableError,
  withDeadline,
} from '@shardflake/core'
import { translateRedisError } from './errors'
import type { ResolvedOptions } from './options'
import {
  type GrantReply,
  ID_SCRIPT,
  ID_SCRIPT_SHA,
  readReply,
  type ScriptReply,
  ScriptStatus,
} from './script'
import { closeServers, openServers, type Server } from './server'
import { ShardingRecord } from './sharding-record'

/** What one script call takes besides the server. */
export interface ScriptCall {
  readonly shard: number
  readonly count: number
  /** The highest counter the source has seen for the shard (-1 for none). */
  readonly floor: number
  readonly clock: (() => number) | undefined
  readonly signal: AbortSignal | undefined
}

/**
 * The servers of a `RedisSource` and failover between them: which to try first, one attempt
 * per server under `timeoutMs`, and a server that failed or did not answer in time passed over
 * for `retryAfterMs` while the next one is tried.
 */
export class ServerSet {
  readonly servers: readonly Server[]
  private readonly record: ShardingRecord
  private readonly shardKeys: string[] = []
  private readonly metaKey: string
  private readonly failover: Failover<Server>
  private allChecked: Promise<void> | undefined
  private allCheckedDone = false

  constructor(private readonly config: ResolvedOptions) {
    this.servers = openServers(config)
    this.failover = new Failover(this.servers, {
      retryAfterMs: config.retryAfterMs,
      strategy: config.strategy,
      ready: (server) => server.client.status === 'ready',
      skipped: 'last',
    })
    this.metaKey = `${config.prefix}meta`
    this.record = new ShardingRecord(config, (server, statusAtSend, started, error) =>
      this.translate(server, statusAtSend, started, error),
    )
  }

  /**
   * Runs the script for `call.count` IDs on the first server that answers in time.
   * @throws ShardingMismatchError, ConfigurationError, CancelledError at once (no failover).
   * @throws SourceUnavailableError when every server failed; `cause` is the last failure.
   */
  async run(call: ScriptCall): Promise<[Server, GrantReply]> {
    if (!this.allCheckedDone) await this.checkAll(call.signal)
    return await this.failover.run(
      async (server) => {
        const reply = await withDeadline(() => this.attempt(server, call), {
          timeoutMs: this.config.timeoutMs,
          signal: call.signal,
          what: `Redis ${server.name}`,
        })
        return [server, reply] as [Server, GrantReply]
      },
      {
        translate: (error) => error as ShardflakeError,
        failsOver: (failure) => failure.retryable && failure.code !== 'CANCELLED',
        unavailable: (failures) =>
          new SourceUnavailableError(
            `No Redis server could issue IDs for shard ${call.shard}. ${failures.map(([server, failure]) => `${server.name}: ${failure.message}`).join(' ')}`,
            { cause: failures.at(-1)?.[1] },
          ),
      },
    )
  }

  /**
   * Compares the recorded sharding on every server before the first call (see
   * {@link ShardingRecord.checkAll}). Shared by concurrent calls and bounded by `timeoutMs`; the
   * caller's signal still ends the wait.
   */
  private async checkAll(signal: AbortSignal | undefined): Promise<void> {
    this.allChecked ??= this.record.checkAll(this.servers).then(
      () => {
        this.allCheckedDone = true
      },
      (error: unknown) => {
        this.allChecked = undefined
        throw error
      },
    )
    const checked = this.allChecked
    await withDeadline(() => checked, {
      timeoutMs: this.config.timeoutMs * 2,
      signal,
      what: 'the Redis servers',
    })
  }

  /** Closes the clients made from URLs within `timeoutMs`; clients passed in stay open. */
  close(): Promise<void> {
    return closeServers(this.servers, this.config.timeoutMs)
  }

  /** One try on one server, every failure translated. */
  private async attempt(server: Server, call: ScriptCall): Promise<GrantReply> {
    const statusAtSend = server.client.status
    const started = performance.now()
    try {
      if (!server.shardingVerified) await this.record.check(server)
      let reply = await this.evaluate(server, call, '')
      if (reply.status === ScriptStatus.UNSTAMPED) {
        reply = await this.evaluate(server, call, this.record.json)
      }
      if (reply.status === ScriptStatus.CONFIG) throw this.record.stampError(server, reply.stamp)
      if (reply.status === ScriptStatus.UNSTAMPED) {
        throw new ConfigurationError(
          `Redis ${server.name} runs another version of the ID script under the same SHA1.`,
        )
      }
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
      elapsedMs: performance.now() - started,
      commandTimeoutMs: server.client.options.commandTimeout,
    })
  }

  /** Runs the script; `description` is the sharding JSON, or '' unless the server asked for it. */
  private async evaluate(
    server: Server,
    call: ScriptCall,
    description: string,
  ): Promise<ScriptReply> {
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
      this.record.key,
      call.count,
      ...server.fixedArgs,
      call.floor,
      call.clock ? String(Math.floor(call.clock())) : '',
      this.config.layout.timeLimit,
      description,
    ] as const
    try {
      return readReply(await server.client.evalsha(...args))
    } catch (error) {
      if (!isNoScript(error)) throw error
      await server.client.script('LOAD', ID_SCRIPT)
      return readReply(await server.client.evalsha(...args))
    }
  }
}

/** A `NOSCRIPT` error reply (the reply's error code, its first word by protocol). */
function isNoScript(error: unknown): boolean {
  const message = (error as { message?: unknown } | null)?.message
  return typeof message === 'string' && message.split(' ', 1)[0] === 'NOSCRIPT'
}
