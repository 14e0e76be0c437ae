import {
  startMariadb,
  startPostgres,
  startRedis,
  type ThrowawayServer,
} from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import {
  installMysql,
  installTicketServers,
  MysqlSource,
  TicketServerSource,
} from '@shardflake/mysql'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import { RedisSource } from '@shardflake/redis'
import type { Pool } from 'mysql2/promise'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { mysqlPool } from '../src/mysql'
import { sharding } from '../src/scenario'

/**
 * The first calls of a new source run its one-time checks (the sharding recorded in each
 * database, the servers' configuration), shared by the callers that arrive meanwhile. A caller
 * that gives up (its signal aborts) during them must fail alone: the others get their IDs.
 */
let postgres: ThrowawayServer
let mariadb: ThrowawayServer
let redis: ThrowawayServer

beforeAll(async () => {
  ;[postgres, mariadb, redis] = await Promise.all([startPostgres(), startMariadb(), startRedis()])
})

afterAll(async () => {
  await Promise.all([postgres?.stop(), mariadb?.stop(), redis?.stop()])
})

const ROUNDS = 5

async function giveUpBesideOthers(source: IdSource, shard: number) {
  const quitter = Promise.resolve(
    source.nextIds(shard, 1, { signal: AbortSignal.timeout(2) }),
  ).then(
    () => 'ok',
    (error: { code?: string }) => error.code ?? String(error),
  )
  const others = await Promise.allSettled([source.nextIds(shard, 20), source.nextIds(shard, 5)])
  await quitter
  return others.map((result) =>
    result.status === 'fulfilled'
      ? result.value.length
      : `${(result.reason as { code?: string }).code}: ${(result.reason as Error).message}`,
  )
}

/**
 * {@link ROUNDS} new sources, each made by `open` (with whatever it needs closed after it,
 * `end`): a caller giving up during the first calls of each fails alone.
 */
async function giveUpInEveryRound(
  shard: number,
  open: () => { source: IdSource; end?: () => Promise<void> },
) {
  for (let round = 0; round < ROUNDS; round++) {
    const { source, end } = open()
    expect(await giveUpBesideOthers(source, shard)).toEqual([20, 5])
    await source.close()
    await end?.()
  }
}

/** {@link giveUpInEveryRound} with sources on pools of the MariaDB server, after `install`. */
async function giveUpOnMariadb(
  shard: number,
  install: (admin: Pool) => Promise<unknown>,
  create: (pool: Pool) => IdSource,
) {
  const admin = mysqlPool(mariadb.port)
  await install(admin)
  await giveUpInEveryRound(shard, () => {
    const pool = mysqlPool(mariadb.port, 'root', 4)
    return { source: create(pool), end: () => pool.end() }
  })
  await admin.end()
}

describe('a caller giving up during the first calls fails alone', () => {
  test('PostgresSource', async () => {
    const admin = new pg.Pool({ connectionString: postgres.url, max: 2 })
    await installPostgres(admin, { sharding, shards: '0-1' })
    await giveUpInEveryRound(1, () => {
      const pool = new pg.Pool({ connectionString: postgres.url, max: 4 })
      pool.on('error', () => undefined)
      return { source: new PostgresSource({ sharding, databases: pool }), end: () => pool.end() }
    })
    await admin.end()
  })

  test('MysqlSource', async () => {
    await giveUpOnMariadb(
      17,
      (admin) => installMysql(admin, { sharding, shards: '16-17' }),
      (pool) => new MysqlSource({ sharding, databases: pool, shards: '16-17' }),
    )
  })

  test('TicketServerSource', async () => {
    await giveUpOnMariadb(
      0,
      (admin) => installTicketServers({ servers: [admin], sequence: 'first_calls' }),
      (pool) => new TicketServerSource({ servers: [pool], sequence: 'first_calls' }),
    )
  })

  test('RedisSource', async () => {
    await giveUpInEveryRound(33, () => ({
      source: new RedisSource({ sharding, servers: [redis.url] }),
    }))
  })
})

/**
 * The first IDs of a freshly installed shard carry the time they are made, also when several
 * callers draw the shard's first IDs at once (the counter starts far behind the clock and must be
 * moved up to it first).
 */
describe('the first IDs of freshly installed shards carry the current time', () => {
  const shards = Array.from({ length: sharding.logicalShards }, (_, shard) => shard)
  const notBefore = () => Date.now() - 3_600_000
  const CALLERS = 16
  const oldBatches = async (source: IdSource) => {
    const old: string[] = []
    for (const shard of shards) {
      const batches = await Promise.all(
        Array.from({ length: CALLERS }, () => Promise.resolve(source.nextIds(shard, 7))),
      )
      for (const batch of batches) {
        if (sharding.layout.timeOf(batch[0]!).getTime() < notBefore()) {
          old.push(`shard ${shard}: ${batch.slice(0, 3).join(', ')}, ...`)
        }
      }
    }
    return old
  }

  test('PostgresSource, 16 concurrent first calls on each of 64 new shards, in 3 databases', async () => {
    const old: string[] = []
    for (const database of ['fresh_a', 'fresh_b', 'fresh_c']) {
      const admin = new pg.Pool({ connectionString: postgres.url, max: 1 })
      await admin.query(`CREATE DATABASE ${database}`)
      await admin.end()
      const url = postgres.url.replace(/\/postgres$/, `/${database}`)
      const pool = new pg.Pool({ connectionString: url, max: CALLERS })
      await installPostgres(pool, { sharding, shards: 'all' })
      const source = new PostgresSource({ sharding, databases: pool })
      old.push(...(await oldBatches(source)).map((batch) => `${database}, ${batch}`))
      await source.close()
      await pool.end()
    }
    expect(old).toEqual([])
  })

  test('MysqlSource, 16 concurrent first calls on each of 64 new shards', async () => {
    const pool = mysqlPool(mariadb.port, 'root', CALLERS)
    await installMysql(pool, { sharding, shards: 'all', schemaPrefix: 'fresh_' })
    const source = new MysqlSource({ sharding, databases: pool, schemaPrefix: 'fresh_' })
    expect(await oldBatches(source)).toEqual([])
    await source.close()
    await pool.end()
  })
})
