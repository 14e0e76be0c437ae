/**
 * The database-backed sources the conformance suite runs TypeORM with, each made with the suite's
 * sharding and closing what it opened.
 */
import { runTag } from '@shardflake/conformance'
import type { IdSource, Sharding } from '@shardflake/core'
import { RedisSource } from '@shardflake/redis'
import { Redis } from 'ioredis'

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** `RedisSource` on the shared Redis under a key prefix of this run, deleted on close. */
export function redisSource(sharding: Sharding, name: string): IdSource {
  const keyPrefix = `sf:typeorm:${runTag()}:${name}:`
  const source = new RedisSource({ sharding, servers: redisUrl, keyPrefix })
  const close = source.close.bind(source)
  source.close = async () => {
    await close()
    const client = new Redis(redisUrl)
    try {
      const keys = await client.keys(`${keyPrefix}*`)
      if (keys.length > 0) await client.del(...keys)
    } finally {
      client.disconnect()
    }
  }
  return source
}
