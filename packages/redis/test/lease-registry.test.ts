import { randomBytes } from 'node:crypto'
import { startRedis, type ThrowawayServer, testLeasedSharding } from '@shardflake/conformance'
import {
  defineSharding,
  LeasedSource,
  LeaseExpiredError,
  NoFreeLeaseError,
  ShardflakeError,
  ShardingMismatchError,
} from '@shardflake/core'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it, onTestFinished } from 'vitest'
import { RedisLeaseRegistry } from '../src'

const sharding = testLeasedSharding(2)
const { layout } = sharding
const shared = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
const prefix = () => `sf_test_leases_${process.pid}_${randomBytes(3).toString('hex')}:`

afterAll(async () => {
  const keys = await shared.keys('sf_test_leases_*')
  if (keys.length > 0) await shared.del(...keys)
  shared.disconnect()
})

async function start(registry: RedisLeaseRegistry, ttlMs = 10_000): Promise<LeasedSource> {
  const source = await LeasedSource.start({ sharding, registry, ttlMs })
  onTestFinished(() => source.close())
  return source
}

describe('RedisLeaseRegistry', () => {
  it('grants workers 1-3 (0 is reserved), refuses a fourth holder, and frees at close', async () => {
    const registry = new RedisLeaseRegistry(shared, { keyPrefix: prefix(), emptyRegistryWaitMs: 0 })
    const sources = [await start(registry), await start(registry), await start(registry)]
    expect(new Set(sources.map((s) => s.lease.worker))).toEqual(new Set([1, 2, 3]))
    expect(sources[2]!.lease.token).toBeGreaterThan(sources[0]!.lease.token)
    await expect(LeasedSource.start({ sharding, registry })).rejects.toBeInstanceOf(
      NoFreeLeaseError,
    )
    const ids = sources.flatMap((s) => s.nextIds(9, 200))
    expect(new Set(ids).size).toBe(600)
    await sources[0]!.close()
    const next = await start(registry)
    expect(next.lease.worker).toBe(sources[0]!.lease.worker)
    expect(new Set([...ids, ...next.nextIds(9, 200)]).size).toBe(800)
    const listed = await registry.list()
    expect(listed.map((lease) => lease.worker)).toEqual([1, 2, 3])
  })

  it('refuses an application with another sharding', async () => {
    const keyPrefix = prefix()
    const registry = new RedisLeaseRegistry(shared, { keyPrefix, emptyRegistryWaitMs: 0 })
    await (await LeasedSource.start({ sharding, registry })).close()
    const other = defineSharding({ layout, logicalShards: 16 })
    await expect(
      LeasedSource.start({
        sharding: other,
        registry: new RedisLeaseRegistry(shared, { keyPrefix }),
      }),
    ).rejects.toBeInstanceOf(ShardingMismatchError)
  })

  it('waits one TTL after finding itself empty, so holders of before stop first', async () => {
    const registry = new RedisLeaseRegistry(shared, { keyPrefix: prefix() })
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 60_000 })).rejects.toThrow(
      /grants no lease until/,
    )
  })

  describe('when the registry server restarts without its data', () => {
    let server: ThrowawayServer | undefined
    afterAll(() => server?.stop())

    it('stops its holders (typed errors), grants again after one TTL, and never repeats an ID', async () => {
      server = await startRedis()
      const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
      redis.on('error', () => {})
      onTestFinished(() => redis.disconnect())
      const ttlMs = 600
      const registry = new RedisLeaseRegistry(redis, { keyPrefix: 'app:' })
      const startWhenGranted = async () => {
        for (;;) {
          try {
            return await start(registry, ttlMs)
          } catch (error) {
            if (!(error instanceof NoFreeLeaseError)) throw error
            await new Promise((resolve) => setTimeout(resolve, 100))
          }
        }
      }
      const sources = [await startWhenGranted(), await startWhenGranted()]
      const ids: bigint[] = []
      const codes = new Set<string>()
      const drive = async (ms: number) => {
        const until = Date.now() + ms
        while (Date.now() < until) {
          for (const source of sources) {
            try {
              ids.push(...source.nextIds(Math.floor(Math.random() * 64), 20))
            } catch (error) {
              expect(error).toBeInstanceOf(ShardflakeError)
              codes.add((error as ShardflakeError).code)
            }
          }
          await new Promise((resolve) => setTimeout(resolve, 2))
        }
      }
      await drive(500)
      await server.restart() // no persistence: every lease, token and mark is gone
      await drive(3000)
      expect(codes).toContain(new LeaseExpiredError('').code)
      expect(new Set(ids).size).toBe(ids.length)
      expect(ids.length).toBeGreaterThan(1000)
      // Both sources hold a lease again on the restarted registry.
      const held = (await registry.list()).filter((lease) => lease.holder !== null)
      expect(held).toHaveLength(2)
    }, 30_000)
  })
})
