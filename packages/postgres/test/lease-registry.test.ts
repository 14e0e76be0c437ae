import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import {
  describeLeaseRegistry,
  startPostgres,
  type ThrowawayServer,
  testLeasedSharding,
} from '@shardflake/conformance'
import {
  defineSharding,
  InvalidArgumentError,
  instagram,
  LeasedSource,
  NoFreeLeaseError,
  ShardConflictError,
  ShardingMismatchError,
  TimedOutError,
} from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest'
import { installPostgres, PostgresLeaseRegistry } from '../src'

const SERVER = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const DATABASE = `leases_${process.pid}_${randomBytes(3).toString('hex')}`
const URL_ = (() => {
  const url = new URL(SERVER)
  url.pathname = `/${DATABASE}`
  return url.toString()
})()

const sharding = testLeasedSharding(2)
const { layout } = sharding
let pool: pg.Pool

beforeAll(async () => {
  const admin = new pg.Client({ connectionString: SERVER })
  await admin.connect()
  await admin.query(`CREATE DATABASE "${DATABASE}"`)
  await admin.end()
  pool = new pg.Pool({ connectionString: URL_, max: 4 })
  pool.on('error', () => {})
  // Create the registry's tables before the processes below race to.
  await (await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(pool) })).close()
})

afterAll(async () => {
  await pool?.end()
  const admin = new pg.Client({ connectionString: SERVER })
  await admin.connect()
  await admin.query(`DROP DATABASE IF EXISTS "${DATABASE}" WITH (FORCE)`)
  await admin.end()
})

describeLeaseRegistry('PostgresLeaseRegistry', {
  open: (schema, { maxTtlMs }) => new PostgresLeaseRegistry(pool, { schema, maxTtlMs }),
  drop: async (schema) => {
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)
    await pool.query(`DROP SCHEMA IF EXISTS "${schema}_copy" CASCADE`)
  },
  // As pg_dump and a restore of the dump: the tables are dropped, created again and refilled.
  snapshot: async (schema) => {
    const tables = ['worker_leases', 'lease_registry']
    await pool.query(`CREATE SCHEMA "${schema}_copy"`)
    for (const table of tables) {
      await pool.query(
        `CREATE TABLE "${schema}_copy".${table} (LIKE "${schema}".${table} INCLUDING ALL)`,
      )
      await pool.query(`INSERT INTO "${schema}_copy".${table} SELECT * FROM "${schema}".${table}`)
    }
    return async () => {
      for (const table of tables) {
        await pool.query(`DROP TABLE "${schema}".${table}`)
        await pool.query(
          `CREATE TABLE "${schema}".${table} (LIKE "${schema}_copy".${table} INCLUDING ALL)`,
        )
        await pool.query(`INSERT INTO "${schema}".${table} SELECT * FROM "${schema}_copy".${table}`)
      }
    }
  },
})

describe('PostgresLeaseRegistry', () => {
  it('waits maxTtlMs when its record was deleted while it holds leases', async () => {
    const schema = `sf_record_${randomBytes(3).toString('hex')}`
    const registry = new PostgresLeaseRegistry(pool, { schema, maxTtlMs: 500 })
    const held = await LeasedSource.start({ sharding, registry, ttlMs: 500 })
    try {
      await pool.query(`DELETE FROM "${schema}".lease_registry`)
      await expect(LeasedSource.start({ sharding, registry, ttlMs: 500 })).rejects.toThrow(
        /grants no lease until/,
      )
    } finally {
      await held.close()
      await pool.query(`DROP SCHEMA "${schema}" CASCADE`)
    }
  })

  it('refuses unknown options and values out of bounds, naming the closest option', () => {
    expect(() => new PostgresLeaseRegistry(pool, { maxTTLMs: 5000 } as never)).toThrow(
      /no option "maxTTLMs"\. Did you mean "maxTtlMs"\?/,
    )
    expect(() => new PostgresLeaseRegistry(pool, { timeoutMs: 0 })).toThrow(InvalidArgumentError)
    expect(() => new PostgresLeaseRegistry(pool, { maxTtlMs: 50 })).toThrow(/maxTtlMs must be/)
  })

  it('grants each holder its own worker with a growing token, and refuses when all are held', async () => {
    const registry = new PostgresLeaseRegistry(pool)
    const sources = await Promise.all(
      [1, 2, 3].map((n) => LeasedSource.start({ sharding, registry, holder: `h${n}` })),
    )
    try {
      // Worker 0 is left to database functions; 1-3 go to the three holders.
      expect(new Set(sources.map((s) => s.lease.worker))).toEqual(new Set([1, 2, 3]))
      await expect(LeasedSource.start({ sharding, registry })).rejects.toBeInstanceOf(
        NoFreeLeaseError,
      )
      const listed = await registry.list()
      expect(listed.filter((lease) => lease.holder !== null)).toHaveLength(3)
      const ids = sources.flatMap((s) => s.nextIds(5, 100))
      expect(new Set(ids).size).toBe(300)
    } finally {
      await Promise.all(sources.map((s) => s.close()))
    }
    expect((await registry.list()).every((lease) => lease.holder === null)).toBe(true)
  })

  it('keeps database functions and leased processes on different workers, both ways', async () => {
    const registry = new PostgresLeaseRegistry(pool)
    const held = await LeasedSource.start({ sharding, registry, holder: 'api-1' })
    try {
      await expect(
        installPostgres(pool, { sharding, shards: '0-1', worker: held.lease.worker }),
      ).rejects.toBeInstanceOf(ShardConflictError)
      const free = [1, 2, 3].find((worker) => worker !== held.lease.worker)!
      await installPostgres(pool, { sharding, shards: '0-1', worker: free })
      // The registry now leases neither worker 0 nor the installed shards' worker.
      const others = [
        await LeasedSource.start({ sharding, registry }),
        await LeasedSource.start({ sharding, registry }).catch((error: unknown) => error),
      ]
      try {
        expect((others[0] as LeasedSource).lease.worker).not.toBe(free)
        expect(others[1]).toBeInstanceOf(NoFreeLeaseError)
      } finally {
        if (others[0] instanceof LeasedSource) await others[0].close()
      }
    } finally {
      await held.close()
      await pool.query('DROP SCHEMA IF EXISTS shard_0 CASCADE')
      await pool.query('DROP SCHEMA IF EXISTS shard_1 CASCADE')
      await pool.query('DROP TABLE IF EXISTS shardflake.shards CASCADE')
    }
  })

  it('refuses an application with another sharding', async () => {
    const registry = new PostgresLeaseRegistry(pool)
    const other = defineSharding({ layout, logicalShards: 32 })
    await expect(LeasedSource.start({ sharding: other, registry })).rejects.toBeInstanceOf(
      ShardingMismatchError,
    )
    const flat = defineSharding({ layout: instagram, logicalShards: 64 })
    await expect(LeasedSource.start({ sharding: flat, registry })).rejects.toThrow(/worker bits/)
  })

  it('keeps IDs distinct while processes compete, are killed with SIGKILL and restart at once, one starting with its clock behind, one stepping it back by seconds, and the registry restarted', async () => {
    // The registry's own server, restarted while the processes run.
    const server: ThrowawayServer = await startPostgres()
    const ownUrl = new URL(server.url)
    ownUrl.pathname = '/postgres'
    const ownPool = new pg.Pool({ connectionString: ownUrl.toString(), max: 2 })
    ownPool.on('error', () => {})
    await (
      await LeasedSource.start({ sharding, registry: new PostgresLeaseRegistry(ownPool) })
    ).close()
    const ttlMs = 1000
    const children = new Set<ChildProcess>()
    const ids: string[] = []
    const codes = new Map<string, number>()
    const child = join(import.meta.dirname, 'fixtures', 'lease-child.mjs')
    let spawned = 0
    const start = (offset = 0, stepBackMs = 0) => {
      spawned++
      const proc = spawn(process.execPath, [child], {
        env: {
          ...process.env,
          PG_URL: ownUrl.toString(),
          TTL_MS: String(ttlMs),
          CLOCK_OFFSET_MS: String(offset),
          STEP_BACK_MS: String(stepBackMs),
          HOLDER: `child-${spawned}`,
        },
        stdio: ['ignore', 'pipe', 'inherit'],
      })
      let rest = ''
      proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (rest + chunk).split('\n')
        rest = lines.pop()!
        for (const line of lines) {
          if (line.startsWith('I ')) ids.push(...line.slice(2).split(' '))
          else if (line.startsWith('E '))
            codes.set(line.slice(2), (codes.get(line.slice(2)) ?? 0) + 1)
        }
      })
      children.add(proc)
      proc.on('exit', () => children.delete(proc))
      return proc
    }
    const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
    try {
      // Three workers to lease, four processes: one waits. One steps its clock back by 2 s.
      for (let i = 0; i < 4; i++) start(0, i === 0 ? 2000 : 0)
      await sleep(1500)
      for (let round = 0; round < 5; round++) {
        const victim = [...children][Math.floor(Math.random() * children.size)]!
        victim.kill('SIGKILL')
        start(round === 2 ? -400 : 0) // one restarts with its clock 400 ms behind
        await sleep(900)
        if (round === 3) await server.restart() // the registry's server goes away and comes back
      }
      await sleep(ttlMs * 2)
      // Every worker has a live holder again within the TTL of its holder's death.
      const held = (await new PostgresLeaseRegistry(ownPool).list()).filter(
        (lease) => lease.holder !== null && lease.expiresAt! > new Date(),
      )
      expect(held).toHaveLength(3)
    } finally {
      for (const proc of children) proc.kill('SIGKILL')
      await sleep(100)
      await ownPool.end()
      await server.stop()
    }
    console.info(
      `leases: ${spawned} processes (5 SIGKILLed, registry restarted once), ${ids.length} IDs, ${new Set(ids).size} distinct, refusals ${JSON.stringify(Object.fromEntries(codes))}`,
    )
    expect(ids.length).toBeGreaterThan(10_000)
    expect(new Set(ids).size).toBe(ids.length)
    const workers = new Set(ids.map((id) => layout.decompose(id).worker))
    expect(workers).toEqual(new Set([1, 2, 3]))
    for (const code of codes.keys()) {
      // SOURCE_UNAVAILABLE: the registry's server was down while a process asked for a lease.
      expect([
        'NO_FREE_LEASE',
        'LEASE_EXPIRED',
        'CLOCK_MOVED_BACKWARDS',
        'SOURCE_UNAVAILABLE',
      ]).toContain(code)
    }
  }, 60_000)
})

describe('PostgresLeaseRegistry with its server stopped (SIGSTOP)', () => {
  let server: ThrowawayServer | undefined
  afterAll(() => server?.stop())

  it('fails start() with TIMED_OUT and returns from close() within timeoutMs', async () => {
    server = await startPostgres()
    const own = new pg.Pool({ connectionString: server.url, max: 4 })
    own.on('error', () => {})
    const registry = new PostgresLeaseRegistry(own, { timeoutMs: 300 })
    const held = await LeasedSource.start({ sharding, registry })
    held.nextIds(1, 10)
    await server.kill('SIGSTOP')
    onTestFinished(async () => {
      await server?.kill('SIGCONT')
      await own.end().catch(() => undefined)
    })
    await expect(LeasedSource.start({ sharding, registry })).rejects.toBeInstanceOf(TimedOutError)
    await held.close() // the release is lost: the next holder waits for the TTL, above the mark
    await expect(registry.list()).rejects.toBeInstanceOf(TimedOutError)
  }, 30_000)
})
