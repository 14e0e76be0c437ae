import {
  ConfigurationError,
  closeWithin,
  describeValue,
  InvalidArgumentError,
} from '@shardflake/core'
import { Redis } from 'ioredis'
import { type ResolvedOptions, recommendedRedisOptions } from './options'
import { configStamp } from './script'

/** One server of a `RedisSource`, with what the source knows about its health. */
export interface Server {
  /** `host:port` (or the socket path). */
  readonly name: string
  readonly client: Redis
  /** True when the source made the client from a URL (and closes it). */
  readonly owned: boolean
  /** The configuration stamp this source records on the server. */
  readonly stamp: string
  /** ARGV[2..8] of the script: step, offset, stamp, epoch, unit, 2^sequenceBits, drift. */
  readonly fixedArgs: readonly (string | number)[]
  /** The server's index in the worker field (0 in offset mode), shifted into place. */
  readonly worker: bigint
  /** Until when (ms since 1970) the server is passed over after a failure. */
  downUntil: number
  /** The last connection error the client reported since it was last ready. */
  socketError: unknown
  /** The sharding check on this server, while it runs and once it passed. */
  shardingChecked: Promise<void> | undefined
  /** True once the sharding check passed. */
  shardingVerified: boolean
}

/**
 * Makes a {@link Server} of each configured input: a client for each URL (with
 * {@link recommendedRedisOptions} and the source's `timeoutMs`), the client as given otherwise.
 * @throws ConfigurationError for an input that is neither, before any client is made.
 * @throws InvalidArgumentError for a string that is not a Redis URL (the clients made before it
 *   are closed).
 */
export function openServers(config: ResolvedOptions): Server[] {
  const { inputs } = config
  for (const input of inputs) {
    if (typeof input !== 'string' && !(input instanceof Redis)) {
      throw new ConfigurationError(
        `servers must be redis:// URLs or ioredis clients, got ${describeValue(input)}.`,
      )
    }
  }
  const servers: Server[] = []
  try {
    for (const [index, input] of inputs.entries()) servers.push(openServer(config, input, index))
  } catch (error) {
    for (const server of servers) if (server.owned) server.client.disconnect()
    throw error
  }
  return servers
}

/** The {@link Server} of one input of `servers`. */
function openServer(config: ResolvedOptions, input: string | Redis, index: number): Server {
  const { layout, sharding, inputs, workerMode, timeoutMs } = config
  const step = workerMode ? 1 : inputs.length
  const driftUnits = Math.floor(config.maxDriftMs / layout.timeUnitMs)
  const owned = typeof input === 'string'
  const client = owned ? connect(input, index, timeoutMs) : input
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
    shardingVerified: false,
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
}

/** A client for a URL of `servers`. @throws InvalidArgumentError for a string that is not one. */
function connect(url: string, index: number, timeoutMs: number): Redis {
  try {
    return new Redis(url, {
      ...recommendedRedisOptions,
      commandTimeout: timeoutMs,
      connectTimeout: timeoutMs,
    })
  } catch (error) {
    throw new InvalidArgumentError(
      `servers[${index}] is not a Redis URL: ${describeValue(url)}. Give redis://host:6379 (rediss:// for TLS), or an ioredis client.`,
      { cause: error },
    )
  }
}

/**
 * Closes the clients made from URLs, each with QUIT and within `timeoutMs`: a client whose QUIT
 * has not been answered by then (a server that stopped answering) is disconnected and its socket
 * destroyed. Clients passed in stay open.
 */
export async function closeServers(servers: readonly Server[], timeoutMs: number): Promise<void> {
  await Promise.all(
    servers
      .filter((server) => server.owned)
      .map((server) =>
        closeWithin(
          timeoutMs,
          () => server.client.quit(),
          () => {
            server.client.disconnect()
            server.client.stream?.destroy()
          },
        ),
      ),
  )
}
