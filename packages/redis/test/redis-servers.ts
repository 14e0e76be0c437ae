import { runTag as conformanceRunTag } from '@shardflake/conformance'
import { Redis } from 'ioredis'

export { startRedis, type ThrowawayServer } from '@shardflake/conformance'

/** The shared Redis (`REDIS_URL` overrides). Tests use per-run key prefixes on it. */
export const sharedRedisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** A tag that keeps the keys of two concurrent runs apart. */
export const runTag = conformanceRunTag()

/** Deletes every key under `prefix` on the server at `url`. */
export async function deletePrefix(url: string, prefix: string): Promise<void> {
  const client = new Redis(url, { maxRetriesPerRequest: 0, retryStrategy: () => null })
  client.on('error', () => {})
  try {
    let cursor = '0'
    do {
      const [next, keys] = await client.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
      if (keys.length > 0) await client.del(...keys)
      cursor = next
    } while (cursor !== '0')
  } finally {
    client.disconnect()
  }
}
