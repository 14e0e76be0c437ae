import {
  ConfigurationError,
  checkCount,
  describeValue,
  Failover,
  type IdRequestContext,
  type IdSource,
  RunningCalls,
  ShardOutOfRangeError,
  SourceUnavailableError,
} from '@shardflake/core'
import { isServerFailure, translateError } from '../errors'
import { callServer } from '../server-call'
import {
  checkSettings,
  readRecorded,
  resolveTicketConfig,
  type ServerEntry,
  type TicketConfig,
  type TicketServersOptions,
  type TicketSettings,
} from './config'

/** What {@link TicketServerSource} takes. */
export type TicketServerSourceOptions = TicketServersOptions

/**
 * Flickr-style ticket servers ("Ticket Servers: Distributed Unique Primary Keys on the Cheap"):
 * N MySQL/MariaDB servers, server k hands out k, k + N, k + 2N, ...; calls go round-robin, and a
 * server that is down or does not answer within `timeoutMs` is skipped for `retryAfterMs` while
 * the next one is asked, so with one server down or hung IDs keep coming from the others, none
 * repeated. Install the servers with {@link installTicketServers}.
 *
 * Each server records the increment and offset it was installed with and hands out tickets only
 * to a source that asks with exactly those (else `ConfigurationError`, nothing issued).
 *
 * **These IDs are plain integers: no time, no shard** (`sharding` is `undefined`). They cannot be
 * decoded, are not time-ordered across servers, and shard rules do not apply to them.
 *
 * {@link close} ends the calls still running at once (`CancelledError`; the connections they held
 * are closed) and returns at once: the pools are yours.
 *
 * @example
 * ```ts
 * import { createMysqlPool, installTicketServers, TicketServerSource } from '@shardflake/mysql'
 *
 * const servers = [
 *   await createMysqlPool('mysql://root@tickets-a:3306/tickets'),
 *   await createMysqlPool('mysql://root@tickets-b:3306/tickets'),
 * ]
 * await installTicketServers({ servers, sequence: 'photos' })
 * const source = new TicketServerSource({ servers, sequence: 'photos', timeoutMs: 500 })
 * const id = await source.nextId(0) // 1, 3, 5 ... from A and 2, 4, 6 ... from B
 * ```
 */
export class TicketServerSource implements IdSource {
  readonly sharding = undefined
  readonly synchronous = false
  readonly sequence: string
  /** The configured increment (with `useServerSettings`, the servers' recorded one is used). */
  readonly increment: number
  private readonly config: TicketConfig
  private learning: Promise<void> | undefined
  private readonly failover: Failover<ServerEntry>
  private readonly calls = new RunningCalls('TicketServerSource')

  /**
   * @throws ConfigurationError for no servers, offsets that do not form 1..increment without
   *   repeats, an increment above 65,535, or the same pool and database given twice.
   * @throws InvalidArgumentError for an unknown option (naming the closest known one), or a
   *   server that is not a mysql2 pool or `{ pool, offset, database }`.
   */
  constructor(options: TicketServerSourceOptions) {
    this.config = resolveTicketConfig(options)
    this.sequence = this.config.sequence
    this.increment = this.config.increment
    this.failover = new Failover(this.config.servers, {
      retryAfterMs: this.config.retryAfterMs,
      strategy: 'round-robin',
      skipped: 'when-none-healthy',
    })
  }

  /** One new ticket. `shard` is only checked (tickets carry no shard). */
  async nextId(shard: number, context?: IdRequestContext): Promise<bigint> {
    const [id] = await this.nextIds(shard, 1, context)
    return id!
  }

  /**
   * `count` new ascending tickets from one server, in one round trip (at most 1,000,000, checked
   * first). A server that fails or does not answer within `timeoutMs` is skipped and the next
   * one asked.
   * @throws SourceUnavailableError when no server answered; `cause` is the last failure.
   */
  async nextIds(shard: number, count: number, context?: IdRequestContext): Promise<bigint[]> {
    checkCount(count)
    if (!Number.isSafeInteger(shard) || shard < 0) {
      throw new ShardOutOfRangeError(
        shard,
        `Shard ${typeof shard === 'number' ? shard : describeValue(shard)} is not a shard number (ticket IDs carry no shard, but the argument is still checked).`,
      )
    }
    return await this.calls.run(
      `ticket sequence ${this.sequence}`,
      context?.signal,
      async (signal) => {
        if (this.config.useServerSettings) await this.learnAll()
        return await this.failover.run((server) => this.draw(server, count, signal), {
          translate: (error, server) =>
            translateError(error, { what: server.what, notInstalled: this.notInstalled(server) }),
          failsOver: isServerFailure,
          unavailable: (failures) =>
            new SourceUnavailableError(
              `None of the ${this.config.servers.length} ticket servers of sequence ${this.sequence} answered within ${this.config.timeoutMs} ms (timeoutMs). Nothing was issued.`,
              { cause: failures.at(-1)?.[1] },
            ),
        })
      },
    )
  }

  /**
   * Ends the calls still running (`CancelledError`; the connections they held are closed, not
   * given back) and refuses later ones. The pools are yours: they stay open. Safe to call twice.
   */
  close(): void {
    this.calls.close()
  }

  private notInstalled(server: ServerEntry): string {
    return `Ticket sequence ${this.sequence} is not installed on ${server.what} (no function ${server.database}.next_${this.sequence}): run installTicketServers({ servers, sequence: '${this.sequence}' }) with every server of the sequence. Nothing was issued.`
  }

  private async draw(server: ServerEntry, count: number, signal?: AbortSignal): Promise<bigint[]> {
    const settings: TicketSettings = this.config.useServerSettings
      ? await this.recordedSettings(server)
      : { increment: this.increment, offset: server.offset }
    const rows = await callServer(
      {
        pool: server.pool,
        timeoutMs: this.config.timeoutMs,
        signal,
        what: server.what,
        // A hung server cannot be asked to kill anything: its connection is closed instead.
        giveUp: 'destroy',
      },
      (run) => run(server.sql, [count, settings.increment, settings.offset]),
    ).catch((error: unknown) => {
      const translated = translateError(error, {
        what: `${server.what}, asked with increment ${settings.increment}, offset ${settings.offset},`,
        notInstalled: this.notInstalled(server),
      })
      if (translated.code === 'CONFIGURATION') this.forgetSettings()
      throw translated
    })
    const value = rows[0]?.v
    if (typeof value !== 'string' || !/^\d+$/.test(value)) {
      throw new ConfigurationError(`${server.what} returned no ticket.`)
    }
    const first = BigInt(value)
    const step = BigInt(settings.increment)
    return Array.from({ length: count }, (_, i) => first + step * BigInt(i))
  }

  /** With `useServerSettings`: read every reachable server's recorded values once, check them. */
  private learnAll(): Promise<void> {
    if (!this.learning) {
      const { servers } = this.config
      const learning = (async () => {
        const results = await Promise.allSettled(servers.map((server) => readRecorded(server)))
        for (const [i, result] of results.entries()) {
          const server = servers[i]!
          if (result.status === 'fulfilled') server.recorded = result.value
          else {
            const translated = translateError(result.reason, { what: server.what })
            if (!isServerFailure(translated)) throw translated
            this.failover.markDown(server)
          }
        }
        const known = servers.flatMap((server) =>
          server.recorded ? [{ server, settings: server.recorded }] : [],
        )
        checkSettings(known, 'The recorded settings', 'Nothing was issued.')
      })()
      this.learning = learning
      learning.catch(() => this.forgetSettings())
    }
    return this.learning
  }

  /** A server's recorded values; a server that was down at first is read and checked now. */
  private async recordedSettings(server: ServerEntry): Promise<TicketSettings> {
    if (server.recorded) return server.recorded
    const settings = await readRecorded(server)
    const others = this.config.servers.flatMap((other) =>
      other !== server && other.recorded ? [{ server: other, settings: other.recorded }] : [],
    )
    checkSettings([...others, { server, settings }], 'The recorded settings', 'Nothing was issued.')
    server.recorded = settings
    return settings
  }

  private forgetSettings(): void {
    this.learning = undefined
    for (const server of this.config.servers) server.recorded = undefined
  }
}
