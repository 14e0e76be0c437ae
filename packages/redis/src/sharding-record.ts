import {
  ConfigurationError,
  type ShardflakeError,
  type ShardingDescription,
  ShardingMismatchError,
  withDeadline,
} from '@shardflake/core'
import type { ResolvedOptions } from './options'
import { shardingPart, stampSharding } from './script'
import type { Server } from './server'

/** Translates a driver failure on `server` of a command sent at `started` with `statusAtSend`. */
export type Translate = (
  server: Server,
  statusAtSend: string,
  started: number,
  error: unknown,
) => ShardflakeError

/**
 * The sharding a `RedisSource` records under its key prefix on every server
 * (`<prefix>sharding`, JSON of `sharding.toJSON()`), and the comparison with what is there.
 */
export class ShardingRecord {
  /** The key holding the description. */
  readonly key: string
  /** The description, as recorded. */
  readonly json: string

  constructor(
    private readonly config: ResolvedOptions,
    private readonly translate: Translate,
  ) {
    this.key = `${config.prefix}sharding`
    this.json = JSON.stringify(config.sharding.toJSON())
  }

  /**
   * Records and compares the sharding on every server at once, so that a standby server with
   * another sharding is found before it is needed. A server that cannot be reached now is
   * checked when it is first used.
   * @throws ShardingMismatchError
   */
  async checkAll(servers: readonly Server[]): Promise<void> {
    const results = await Promise.allSettled(
      servers.map((server) =>
        withDeadline(() => this.check(server), {
          timeoutMs: this.config.timeoutMs,
          what: `Redis ${server.name}`,
        }),
      ),
    )
    for (const result of results) {
      if (result.status === 'rejected' && result.reason instanceof ShardingMismatchError) {
        throw result.reason
      }
    }
  }

  /**
   * Records the sharding on the server if none is (SET NX), and compares what is recorded. Once
   * per server while it passes.
   * @throws ShardingMismatchError
   */
  check(server: Server): Promise<void> {
    server.shardingChecked ??= this.compare(server)
    const checked = server.shardingChecked
    checked.catch(() => {
      if (server.shardingChecked === checked) server.shardingChecked = undefined
    })
    return checked
  }

  /** The error for a configuration stamp that differs from the server's `recorded` one. */
  stampError(server: Server, recorded: string): ShardflakeError {
    const where = this.where(server)
    const ours = shardingPart(this.config.sharding)
    if (stampSharding(recorded) !== ours) {
      return new ShardingMismatchError(
        `${where} serves another sharding (${stampSharding(recorded) ?? recorded}; this source: ${ours}, as epoch,unit,bits,order,logicalShards). Keys would land on different shards depending on who writes the row: use one defineSharding({ layout, logicalShards }) everywhere, or another keyPrefix.`,
      )
    }
    return new ConfigurationError(
      `${where} already serves another configuration (${recorded}; this source: ${server.stamp}). Every process must use the same maxDriftMs and server list in the same order; use another keyPrefix for another configuration.`,
    )
  }

  private async compare(server: Server): Promise<void> {
    const statusAtSend = server.client.status
    const started = performance.now()
    let recorded: unknown
    try {
      const replies = await server.client
        .multi()
        .set(this.key, this.json, 'NX')
        .get(this.key)
        .exec()
      const [error, value] = replies?.[1] ?? [undefined, null]
      if (error) throw error
      recorded = value
    } catch (error) {
      throw this.translate(server, statusAtSend, started, error)
    }
    if (typeof recorded !== 'string') {
      server.shardingVerified = true
      return
    }
    let description: ShardingDescription
    try {
      description = JSON.parse(recorded) as ShardingDescription
    } catch (cause) {
      throw new ShardingMismatchError(
        `${this.where(server)} holds ${this.key}, but not as a sharding description: another program uses this key prefix. Choose another keyPrefix.`,
        { cause },
      )
    }
    this.config.sharding.checkSame(description, this.where(server))
    server.shardingVerified = true
  }

  private where(server: Server): string {
    return `Redis ${server.name} (keyPrefix ${JSON.stringify(this.config.prefix)})`
  }
}
