import { defineSharding, instagram, type Layout, type ShardflakeError } from '@shardflake/core'
import { Redis } from 'ioredis'
import { afterAll } from 'vitest'
import { RedisSource, type RedisSourceOptions } from '../src'
import { deletePrefix, startRedis, type ThrowawayServer } from './redis-servers'

/** The sharding most tests use. */
export const sharding = defineSharding({ layout: instagram, logicalShards: 2000 })

/** An injectable clock and a sleep that advances it (the script then uses this time, not TIME). */
export function fakeClock(start: number) {
  const clock = {
    now: start,
    slept: 0,
    read: () => clock.now,
    sleep: async (ms: number) => {
      clock.slept += ms
      clock.now += ms
    },
  }
  return clock
}

/** How many IDs share each (time) value, for IDs of one shard. */
export function perTick(layout: Layout, ids: readonly bigint[]): Map<number, number> {
  const counts = new Map<number, number>()
  for (const id of ids) {
    const { time } = layout.decompose(id)
    counts.set(time, (counts.get(time) ?? 0) + 1)
  }
  return counts
}

export function isAscending(ids: readonly bigint[]): boolean {
  for (let i = 1; i < ids.length; i++) if (ids[i]! <= ids[i - 1]!) return false
  return true
}

/** The error a promise rejects with; fails the test when it resolves. */
export function failure(promise: Promise<unknown>): Promise<ShardflakeError> {
  return promise.then(
    () => {
      throw new Error('expected a failure')
    },
    (error: unknown) => error as ShardflakeError,
  )
}

/**
 * What a test file opens (sources, plain clients, throwaway servers), closed after the file, and
 * the key prefixes it deletes then. `defaults` are the options every source starts from.
 */
export function testFixture(defaults: () => RedisSourceOptions) {
  const sources: RedisSource[] = []
  const clients: Redis[] = []
  const servers: ThrowawayServer[] = []
  const prefixes: [url: () => string, prefix: string][] = []
  afterAll(async () => {
    await Promise.all(sources.map((source) => source.close()))
    for (const client of clients) client.disconnect()
    for (const [url, prefix] of prefixes) await deletePrefix(url(), prefix)
    await Promise.all(servers.map((server) => server.stop()))
  })
  return {
    /** A source with `defaults` and `options`, closed after the file. */
    source(options: Partial<RedisSourceOptions> = {}): RedisSource {
      const source = new RedisSource({ ...defaults(), ...options })
      sources.push(source)
      return source
    },
    /** A plain client (no retries), disconnected after the file. */
    client(url: string): Redis {
      const client = new Redis(url, { maxRetriesPerRequest: 0 })
      client.on('error', () => {})
      clients.push(client)
      return client
    },
    /** A throwaway Redis on a free port, stopped after the file. */
    async server(): Promise<ThrowawayServer> {
      const server = await startRedis()
      servers.push(server)
      return server
    },
    /** Deletes the keys under `prefix` on the server at `url()` after the file. */
    deleteAfter(url: () => string, prefix: string): void {
      prefixes.push([url, prefix])
    },
  }
}
