import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import {
  describeLeaseRegistry,
  startRedis,
  type ThrowawayServer,
  testLeasedSharding,
} from '@shardflake/conformance'
import {
  defineSharding,
  InvalidArgumentError,
  LeasedSource,
  LeaseExpiredError,
  NoFreeLeaseError,
  ShardflakeError,
  ShardingMismatchError,
  TimedOutError,
} from '@shardflake/core'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, it, onTestFinished } from 'vitest'
import { RedisLeaseRegistry } from '../src'

const sharding = testLeasedSharding(2)
const { layout } = sharding
const shared = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true })
const prefix = () => `sf_test_leases_${process.pid}_${randomBytes(3).toString('hex')}:`
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

afterAll(async () => {
  const keys = await shared.keys('sf_test_leases_*')
  if (keys.length > 0) await shared.del(...keys)
  shared.disconnect()
})

describeLeaseRegistry('RedisLeaseRegistry', {
  open: (storage, { maxTtlMs }) =>
    new RedisLeaseRegistry(shared, { keyPrefix: `sf_test_leases_${storage}:`, maxTtlMs }),
  drop: async (storage) => {
    const keys = await shared.keys(`sf_test_leases_${storage}:*`)
    if (keys.length > 0) await shared.del(...keys)
  },
  firstGrantWaits: true,
  // As a restart without persistence: every key gone.
  snapshot: async (storage) => async () => {
    const keys = await shared.keys(`sf_test_leases_${storage}:*`)
    if (keys.length > 0) await shared.del(...keys)
  },
})

/** A LeasedSource, through the wait of a registry that was found empty; closed after the test. */
async function start(registry: RedisLeaseRegistry, ttlMs: number): Promise<LeasedSource> {
  for (;;) {
    try {
      const source = await LeasedSource.start({ sharding, registry, ttlMs })
      onTestFinished(() => source.close())
      return source
    } catch (error) {
      if (!(error instanceof NoFreeLeaseError) || !/grants no lease until/.test(error.message)) {
        throw error
      }
      await sleep(100)
    }
  }
}

describe('RedisLeaseRegistry', () => {
  it('refuses unknown options and values out of bounds, naming the closest option', () => {
    expect(() => new RedisLeaseRegistry(shared, { maxTTLMs: 5000 } as never)).toThrow(
      /no option "maxTTLMs"\. Did you mean "maxTtlMs"\?/,
    )
    expect(() => new RedisLeaseRegistry(shared, { timeoutMs: 0 })).toThrow(InvalidArgumentError)
    expect(() => new RedisLeaseRegistry(shared, { maxTtlMs: 50 })).toThrow(/maxTtlMs must be/)
  })

  it('grants workers 1-3 (0 is reserved), refuses a fourth holder, and frees at close', async () => {
    const registry = new RedisLeaseRegistry(shared, { keyPrefix: prefix(), maxTtlMs: 1000 })
    const sources = [
      await start(registry, 1000),
      await start(registry, 1000),
      await start(registry, 1000),
    ]
    expect(new Set(sources.map((s) => s.lease.worker))).toEqual(new Set([1, 2, 3]))
    expect(sources[2]!.lease.token).toBeGreaterThan(sources[0]!.lease.token)
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 1000 })).rejects.toBeInstanceOf(
      NoFreeLeaseError,
    )
    const ids = sources.flatMap((s) => s.nextIds(9, 200))
    expect(new Set(ids).size).toBe(600)
    await sources[0]!.close()
    const next = await start(registry, 1000)
    expect(next.lease.worker).toBe(sources[0]!.lease.worker)
    expect(new Set([...ids, ...next.nextIds(9, 200)]).size).toBe(800)
    const listed = await registry.list()
    expect(listed.map((lease) => lease.worker)).toEqual([0, 1, 2, 3])
  })

  it('refuses an application with another sharding', async () => {
    const keyPrefix = prefix()
    const registry = new RedisLeaseRegistry(shared, { keyPrefix, maxTtlMs: 300 })
    await (await start(registry, 300)).close()
    const other = defineSharding({ layout, logicalShards: 16 })
    await expect(
      LeasedSource.start({
        sharding: other,
        registry: new RedisLeaseRegistry(shared, { keyPrefix, maxTtlMs: 300 }),
        ttlMs: 300,
      }),
    ).rejects.toBeInstanceOf(ShardingMismatchError)
  })

  it('waits maxTtlMs after finding itself empty, whatever TTL the holder asks for', async () => {
    const registry = new RedisLeaseRegistry(shared, { keyPrefix: prefix(), maxTtlMs: 60_000 })
    const asked = Date.now()
    const refused = await LeasedSource.start({ sharding, registry, ttlMs: 500 }).catch(
      (error: unknown) => error,
    )
    expect(refused).toBeInstanceOf(NoFreeLeaseError)
    const until = /grants no lease until (\S+) /.exec((refused as Error).message)?.[1]
    // Another holder could hold a 60 s lease: a wait of the 500 ms asked for would not cover it.
    expect(new Date(until!).getTime()).toBeGreaterThanOrEqual(asked + 59_000)
  })

  describe('when the registry server restarts without its data', () => {
    let server: ThrowawayServer | undefined
    afterAll(() => server?.stop())

    it('stops its holders (typed errors), grants again after maxTtlMs, and never repeats an ID', async () => {
      server = await startRedis()
      const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
      redis.on('error', () => {})
      onTestFinished(() => redis.disconnect())
      const ttlMs = 600
      const registry = new RedisLeaseRegistry(redis, { keyPrefix: 'app:', maxTtlMs: ttlMs })
      const sources = [await start(registry, ttlMs), await start(registry, ttlMs)]
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
          await sleep(2)
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

    it('never meets the IDs of a holder paused across the restart whose TTL is longer than the next holder’s', async () => {
      server ??= await startRedis()
      const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
      redis.on('error', () => {})
      onTestFinished(() => redis.disconnect())
      const keyPrefix = `paused_${randomBytes(3).toString('hex')}:`
      const maxTtlMs = 6000
      const registry = new RedisLeaseRegistry(redis, { keyPrefix, maxTtlMs, timeoutMs: 500 })
      // Through the first wait of the new registry, then free again.
      await (await start(registry, 500)).close()
      // A holder in its own process, with the longest TTL.
      const child = spawn(
        process.execPath,
        [join(import.meta.dirname, 'fixtures', 'lease-child.mjs')],
        {
          env: {
            ...process.env,
            REDIS_URL: server.url,
            KEY_PREFIX: keyPrefix,
            TTL_MS: String(maxTtlMs),
            MAX_TTL_MS: String(maxTtlMs),
          },
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      )
      onTestFinished(() => {
        child.kill('SIGKILL')
      })
      const childIds = collect(child)
      while (childIds.ids.length < 2000) await sleep(20)
      // The holder stops (SIGSTOP) between renewals; its registry restarts without its data.
      child.kill('SIGSTOP')
      await server.restart()
      // A holder with a short TTL asks for a worker at once, in this process.
      const starting = start(registry, 500)
      await sleep(1000)
      child.kill('SIGCONT') // the paused holder issues again, up to its mark
      const next = await starting
      const ids = [...next.nextIds(1, 200)]
      const until = Date.now() + 1500
      while (Date.now() < until) {
        try {
          ids.push(...next.nextIds(Math.floor(Math.random() * 8), 20))
        } catch (error) {
          expect(error).toBeInstanceOf(ShardflakeError)
        }
        await sleep(2)
      }
      child.kill('SIGKILL')
      const all = [...childIds.ids, ...ids.map(String)]
      expect(ids.length).toBeGreaterThan(1000)
      expect(new Set(all).size).toBe(all.length)
      for (const code of childIds.codes.keys()) {
        expect(['LEASE_EXPIRED', 'NO_FREE_LEASE', 'TIMED_OUT', 'SOURCE_UNAVAILABLE']).toContain(
          code,
        )
      }
    }, 60_000)
  })
})

describe('RedisLeaseRegistry with its server stopped (SIGSTOP)', () => {
  let server: ThrowawayServer | undefined
  afterAll(() => server?.stop())

  it('fails start() with TIMED_OUT and returns from close() within timeoutMs', async () => {
    server = await startRedis()
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1, retryStrategy: () => 50 })
    redis.on('error', () => {})
    onTestFinished(() => redis.disconnect())
    const registry = new RedisLeaseRegistry(redis, { maxTtlMs: 300, timeoutMs: 300 })
    const held = await start(registry, 300)
    held.nextIds(1, 10)
    await server.kill('SIGSTOP')
    onTestFinished(() => server?.kill('SIGCONT'))
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 300 })).rejects.toBeInstanceOf(
      TimedOutError,
    )
    await held.close() // the release is lost: the next holder waits for the TTL, above the mark
    await expect(registry.list()).rejects.toBeInstanceOf(TimedOutError)
  }, 30_000)
})

/** The IDs a child process printed ("I <id> ..."), whole lines only, and its refusals by code. */
function collect(child: ChildProcess): { ids: string[]; codes: Map<string, number> } {
  const found = { ids: [] as string[], codes: new Map<string, number>() }
  let rest = ''
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const lines = (rest + chunk).split('\n')
    rest = lines.pop()!
    for (const line of lines) {
      if (line.startsWith('I ')) found.ids.push(...line.slice(2).split(' '))
      else if (line.startsWith('E ')) {
        const code = line.slice(2)
        found.codes.set(code, (found.codes.get(code) ?? 0) + 1)
      }
    }
  })
  return found
}
