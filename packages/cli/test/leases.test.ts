import { randomBytes } from 'node:crypto'
import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  LeasedSource,
  NoFreeLeaseError,
} from '@shardflake/core'
import { PostgresLeaseRegistry } from '@shardflake/postgres'
import { RedisLeaseRegistry } from '@shardflake/redis'
import { Redis } from 'ioredis'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

const PG_URL = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const tag = `${process.pid}_${randomBytes(3).toString('hex')}`
const layout = defineLayout({
  name: 'leased',
  epoch: '2025-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  workerBits: 2,
  sequenceBits: 8,
})
const sharding = defineSharding({ layout, logicalShards: 64 })
const pool = new pg.Pool({ connectionString: PG_URL, max: 2 })
const redis = new Redis(REDIS_URL)

afterAll(async () => {
  for (const schema of [`leases_${tag}`, `restored_${tag}`, `ttl_${tag}`]) {
    await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`)
  }
  await pool.end()
  const keys = await redis.keys(`sf_cli_${tag}:*`)
  if (keys.length > 0) await redis.del(...keys)
  redis.disconnect()
})

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

describe('shardflake leases', () => {
  it('shows holders, tokens, expiry and marks in PostgreSQL, and frees a dead holder', async () => {
    const registry = new PostgresLeaseRegistry(pool, { schema: `leases_${tag}` })
    const source = await LeasedSource.start({ sharding, registry, holder: 'api-7:1234' })
    try {
      source.nextIds(3, 10)
      const shown = await run(
        'leases',
        'postgres',
        '--url',
        PG_URL,
        '--schema',
        `leases_${tag}`,
        '--json',
      )
      expect(shown.code).toBe(0)
      const rows = JSON.parse(shown.stdout) as {
        worker: number
        holder: string | null
        token: string
      }[]
      const held = rows.find((row) => row.worker === source.lease.worker)!
      expect(held).toMatchObject({ holder: 'api-7:1234', token: source.lease.token.toString() })
      const text = await run('leases', 'postgres', '--url', PG_URL, '--schema', `leases_${tag}`)
      expect(text.stdout).toMatch(/worker\s+holder\s+token\s+expires\s+high-water mark/)
      expect(text.stdout).toMatch(/api-7:1234/)
      const freed = await run(
        'leases',
        'postgres',
        '--url',
        PG_URL,
        '--schema',
        `leases_${tag}`,
        '--free',
        String(source.lease.worker),
        '--json',
      )
      const after = JSON.parse(freed.stdout) as {
        worker: number
        holder: string | null
        highWater: string | null
      }[]
      const row = after.find((r) => r.worker === source.lease.worker)!
      expect(row.holder).toBeNull()
      expect(row.highWater).not.toBeNull() // the mark stays: the next holder starts above it
    } finally {
      await source.close()
    }
  })

  it('reads a Redis registry, and explains a missing server', async () => {
    const keyPrefix = `sf_cli_${tag}:`
    const registry = new RedisLeaseRegistry(redis, { keyPrefix, maxTtlMs: 300 })
    // A new Redis registry waits maxTtlMs before its first grant.
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 300 })).rejects.toBeInstanceOf(
      NoFreeLeaseError,
    )
    await new Promise((resolve) => setTimeout(resolve, 350))
    const source = await LeasedSource.start({ sharding, registry, holder: 'worker-a', ttlMs: 300 })
    try {
      const shown = await run('leases', 'redis', '--url', REDIS_URL, '--key-prefix', keyPrefix)
      expect(shown.code).toBe(0)
      expect(shown.stdout).toMatch(/worker-a/)
    } finally {
      await source.close()
    }
    const empty = await run('leases', 'postgres', '--url', PG_URL, '--schema', `none_${tag}`)
    expect(empty).toMatchObject({ code: 0 })
    expect(empty.stdout).toMatch(/No worker leases in this postgres registry yet/)
    const missing = await run('leases', 'postgres', '--url', 'postgres://postgres@127.0.0.1:1/none')
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/lease registry could not be reached/)
  })

  it('--restored makes a registry restored from an older copy grant nothing for its maxTtlMs', async () => {
    const schema = `restored_${tag}`
    const registry = new PostgresLeaseRegistry(pool, { schema })
    await (await LeasedSource.start({ sharding, registry })).close()
    const marked = await run(
      'leases',
      'postgres',
      '--url',
      PG_URL,
      '--schema',
      schema,
      '--restored',
    )
    expect(marked.code).toBe(0)
    const until = /grants no lease until (\S+):/.exec(marked.stdout)?.[1]
    expect(new Date(until!).getTime()).toBeGreaterThan(Date.now() + 5_000)
    await expect(LeasedSource.start({ sharding, registry })).rejects.toThrow(
      /grants no lease until/,
    )
    const none = await run(
      'leases',
      'postgres',
      '--url',
      PG_URL,
      '--schema',
      `none_${tag}`,
      '--restored',
    )
    expect(none.stdout).toMatch(/holds no record yet/)
  })

  it('--max-ttl records another maxTtlMs, and refuses to lower it below a live lease', async () => {
    const schema = `ttl_${tag}`
    const longer = new PostgresLeaseRegistry(pool, { schema, maxTtlMs: 20_000 })
    const registry = new PostgresLeaseRegistry(pool, { schema })
    await (await LeasedSource.start({ sharding, registry })).close()
    await expect(LeasedSource.start({ sharding, registry: longer })).rejects.toBeInstanceOf(
      ConfigurationError,
    )
    const raised = await run(
      'leases',
      'postgres',
      '--url',
      PG_URL,
      '--schema',
      schema,
      '--max-ttl',
      '20000',
    )
    expect(raised).toMatchObject({ code: 0 })
    expect(raised.stdout).toMatch(/recorded maxTtlMs 20000/)
    const held = await LeasedSource.start({ sharding, registry: longer, ttlMs: 20_000 })
    try {
      await expect(LeasedSource.start({ sharding, registry })).rejects.toThrow(
        /records maxTtlMs 20000/,
      )
      const lowered = await run(
        'leases',
        'postgres',
        '--url',
        PG_URL,
        '--schema',
        schema,
        '--max-ttl',
        '10000',
      )
      expect(lowered.code).toBe(1)
      expect(lowered.stderr).toMatch(
        /cannot lower maxTtlMs to 10000 while a live lease has a longer TTL/,
      )
    } finally {
      await held.close()
    }
    const lowered = await run(
      'leases',
      'postgres',
      '--url',
      PG_URL,
      '--schema',
      schema,
      '--max-ttl',
      '10000',
    )
    expect(lowered.code).toBe(0)
    await (await LeasedSource.start({ sharding, registry })).close()
  })
})
