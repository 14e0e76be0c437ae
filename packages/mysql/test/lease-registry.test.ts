import { randomBytes } from 'node:crypto'
import {
  describeLeaseRegistry,
  startMariadb,
  type ThrowawayServer,
  testLeasedSharding,
} from '@shardflake/conformance'
import {
  defineSharding,
  InvalidArgumentError,
  LeasedSource,
  NoFreeLeaseError,
  ShardflakeError,
  ShardingMismatchError,
  TimedOutError,
} from '@shardflake/core'
import mysql from 'mysql2/promise'
import { afterAll, describe, expect, it, onTestFinished } from 'vitest'
import { MysqlLeaseRegistry } from '../src'

const sharding = testLeasedSharding(2)
const { layout } = sharding
const pool = mysql.createPool({
  uri: process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test',
  connectionLimit: 6,
})
const databases: string[] = []
const database = () => {
  const name = `sf_leases_${process.pid}_${randomBytes(3).toString('hex')}`
  databases.push(name)
  return name
}

afterAll(async () => {
  for (const name of databases) await pool.query(`DROP DATABASE IF EXISTS \`${name}\``)
  await pool.end()
})

async function start(registry: MysqlLeaseRegistry, ttlMs = 10_000): Promise<LeasedSource> {
  const source = await LeasedSource.start({ sharding, registry, ttlMs })
  onTestFinished(() => source.close())
  return source
}

describeLeaseRegistry('MysqlLeaseRegistry', {
  open: (database, { maxTtlMs }) => new MysqlLeaseRegistry(pool, { database, maxTtlMs }),
  drop: async (database) => {
    await pool.query(`DROP DATABASE IF EXISTS \`${database}\``)
    await pool.query(`DROP DATABASE IF EXISTS \`${database}_copy\``)
  },
  // As mysqldump and a restore of the dump a moment later: the tables are dropped, created again
  // and refilled.
  snapshot: async (database) => {
    const tables = ['worker_leases', 'lease_registry']
    await pool.query(`CREATE DATABASE \`${database}_copy\``)
    for (const table of tables) {
      await pool.query(`CREATE TABLE \`${database}_copy\`.${table} LIKE \`${database}\`.${table}`)
      await pool.query(
        `INSERT INTO \`${database}_copy\`.${table} SELECT * FROM \`${database}\`.${table}`,
      )
    }
    return async () => {
      // A restore comes later than the table it replaces was created (the server records the
      // creation time in seconds).
      await new Promise((resolve) => setTimeout(resolve, 1100))
      for (const table of tables) {
        await pool.query(`DROP TABLE \`${database}\`.${table}`)
        await pool.query(`CREATE TABLE \`${database}\`.${table} LIKE \`${database}_copy\`.${table}`)
        await pool.query(
          `INSERT INTO \`${database}\`.${table} SELECT * FROM \`${database}_copy\`.${table}`,
        )
      }
    }
  },
})

describe('MysqlLeaseRegistry', () => {
  it('waits maxTtlMs when its record was deleted while it holds leases', async () => {
    const name = database()
    const registry = new MysqlLeaseRegistry(pool, { database: name, maxTtlMs: 500 })
    await start(registry, 500)
    await pool.query(`DELETE FROM \`${name}\`.lease_registry`)
    await expect(LeasedSource.start({ sharding, registry, ttlMs: 500 })).rejects.toThrow(
      /grants no lease until/,
    )
  })

  it('refuses unknown options and values out of bounds, naming the closest option', () => {
    expect(() => new MysqlLeaseRegistry(pool, { maxTTLMs: 5000 } as never)).toThrow(
      /no option "maxTTLMs"\. Did you mean "maxTtlMs"\?/,
    )
    expect(() => new MysqlLeaseRegistry(pool, { timeoutMs: 0 })).toThrow(InvalidArgumentError)
    expect(() => new MysqlLeaseRegistry(pool, { maxTtlMs: 50 })).toThrow(/maxTtlMs must be/)
  })

  it('grants concurrent holders distinct workers (0 reserved), refuses a fourth, frees at close', async () => {
    const registry = new MysqlLeaseRegistry(pool, { database: database() })
    const sources = await Promise.all([start(registry), start(registry), start(registry)])
    expect(new Set(sources.map((s) => s.lease.worker))).toEqual(new Set([1, 2, 3]))
    expect(new Set(sources.map((s) => s.lease.token)).size).toBe(3)
    await expect(LeasedSource.start({ sharding, registry })).rejects.toBeInstanceOf(
      NoFreeLeaseError,
    )
    const ids = sources.flatMap((s) => s.nextIds(4, 200))
    await sources[1]!.close()
    const next = await start(registry)
    expect(next.lease.worker).toBe(sources[1]!.lease.worker)
    expect(next.lease.token).toBeGreaterThan(sources[2]!.lease.token)
    ids.push(...next.nextIds(4, 200))
    expect(new Set(ids).size).toBe(800)
    expect((await registry.list()).filter((lease) => lease.holder !== null)).toHaveLength(3)
  })

  it('never leases worker 0, which the MySQL routines write, even when told other reserved workers', async () => {
    const registry = new MysqlLeaseRegistry(pool, { database: database(), reservedWorkers: [3] })
    const sources = [await start(registry), await start(registry)]
    expect(new Set(sources.map((s) => s.lease.worker))).toEqual(new Set([1, 2]))
    await expect(LeasedSource.start({ sharding, registry })).rejects.toBeInstanceOf(
      NoFreeLeaseError,
    )
  })

  it('refuses an application with another sharding', async () => {
    const name = database()
    const registry = new MysqlLeaseRegistry(pool, { database: name })
    await (await start(registry)).close()
    const other = defineSharding({ layout, logicalShards: 8 })
    // The same registry object checks each sharding it is used with, and so does a new one.
    await expect(LeasedSource.start({ sharding: other, registry })).rejects.toBeInstanceOf(
      ShardingMismatchError,
    )
    await expect(
      LeasedSource.start({
        sharding: other,
        registry: new MysqlLeaseRegistry(pool, { database: name }),
      }),
    ).rejects.toBeInstanceOf(ShardingMismatchError)
  })

  describe('when the registry server restarts', () => {
    let server: ThrowawayServer | undefined
    afterAll(() => server?.stop())

    it('keeps its leases and marks, and no ID repeats', async () => {
      server = await startMariadb()
      const own = mysql.createPool({ uri: server.url, connectionLimit: 4 })
      onTestFinished(() => own.end().catch(() => undefined))
      const registry = new MysqlLeaseRegistry(own)
      const ttlMs = 2000
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
          await new Promise((resolve) => setTimeout(resolve, 2))
        }
      }
      await drive(500)
      await server.restart()
      await drive(2500)
      expect(new Set(ids).size).toBe(ids.length)
      expect(ids.length).toBeGreaterThan(1000)
      for (const code of codes) expect(['LEASE_EXPIRED']).toContain(code)
      const held = (await registry.list()).filter((lease) => lease.holder !== null)
      expect(held.map((lease) => lease.worker).sort()).toEqual(
        sources.map((s) => s.lease.worker).sort(),
      )
      // A restart loses nothing here (InnoDB, its tables kept): a new holder is granted at once.
      const third = await start(registry, ttlMs)
      expect(third.lease.startAfterMs).toBeLessThan(Date.now())
    }, 60_000)
  })
})

describe('MysqlLeaseRegistry with its server stopped (SIGSTOP)', () => {
  let server: ThrowawayServer | undefined
  afterAll(() => server?.stop())

  it('fails start() with TIMED_OUT and returns from close() within timeoutMs', async () => {
    server = await startMariadb()
    const own = mysql.createPool({ uri: server.url, connectionLimit: 4 })
    const registry = new MysqlLeaseRegistry(own, { timeoutMs: 300 })
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
