import { ClockMovedBackwardsError, defineLayout, defineSharding } from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { installMysql, MysqlSource, SIGNALS } from '../src'
import { createPool, dropDatabases, RUN, rows, sqlStateOf } from './helpers'

const PREFIX = `sf_my_atom_${RUN}_`
const layout = defineLayout({
  name: 'atom',
  epoch: '2015-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})
const sharding = defineSharding({ layout, logicalShards: 64 })
const MARIA = `${PREFIX}maria_shard_`
const MARIA_MYISAM = `${PREFIX}myisam_shard_`
const MARIA_INNODB = `${PREFIX}innodb_shard_`
const MY8 = `${PREFIX}my8_shard_`
const LOG = `\`${PREFIX}log\``

let pool: Pool

beforeAll(async () => {
  pool = createPool(undefined, { connectionLimit: 40 })
  await dropDatabases(pool, PREFIX)
  await installMysql(pool, {
    sharding,
    shards: [7, 8],
    schemaPrefix: MARIA,
    dialect: 'mariadb',
  })
  await installMysql(pool, {
    sharding,
    shards: [7],
    schemaPrefix: MARIA_MYISAM,
    dialect: 'mariadb',
    counterEngine: 'MyISAM',
  })
  await installMysql(pool, {
    sharding,
    shards: [7],
    schemaPrefix: MARIA_INNODB,
    dialect: 'mariadb',
    counterEngine: 'InnoDB',
  })
  await installMysql(pool, { sharding, shards: [7], schemaPrefix: MY8, dialect: 'mysql8' })
  await pool.query(`CREATE DATABASE ${LOG}`)
})

afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

async function countLog(table: string): Promise<{ n: number; d: number }> {
  const [row] = await rows<{ n: string; d: string }>(
    pool,
    `SELECT COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM ${LOG}.${table}`,
  )
  return { n: Number(row!.n), d: Number(row!.d) }
}

/**
 * Every counter engine of each dialect's SQL, hammered through every way in: a counter that is
 * not atomic repeats IDs here. Aria and MyISAM lock the whole table for the statement that calls
 * a routine (MariaDB prelocks every table a stored function uses), so on them only a routine
 * that reads and updates the counter in two statements (a procedure) can race; InnoDB locks the
 * row at the UPDATE, so a routine that reads the counter first and updates it afterwards races
 * even inside one function. Hence the InnoDB counter under the MariaDB SQL as well as MySQL 8's.
 */
describe.each([
  ['mariadb SQL (Aria counter)', MARIA, 'maria'],
  ['mariadb SQL (MyISAM counter)', MARIA_MYISAM, 'myisam'],
  ['mariadb SQL (InnoDB counter)', MARIA_INNODB, 'innodb'],
  ['mysql8 SQL (InnoDB counter)', MY8, 'my8'],
])('%s: 32 concurrent connections on one shard', (_name, prefix, tag) => {
  it('never repeat an ID: function per row, next_ids(n), MysqlSource batches, INSERTs', async () => {
    const table = `hammer_${tag}`
    const target = `${LOG}.${table}_rows`
    await pool.query(`CREATE TABLE ${LOG}.${table} (id BIGINT NOT NULL, how CHAR(3) NOT NULL)`)
    await pool.query(`CREATE TABLE ${target} (id BIGINT NOT NULL PRIMARY KEY, n INT NOT NULL)`)
    const db = `\`${prefix}7\``
    const source = new MysqlSource({ sharding, databases: pool, schemaPrefix: prefix, shards: [7] })
    const workers = Array.from({ length: 32 }, async (_, w) => {
      const connection = await pool.getConnection()
      try {
        for (let round = 0; round < 12; round++) {
          const kind = (w + round) % 4
          if (kind === 0) {
            await connection.query(
              `INSERT INTO ${LOG}.${table} (id, how) VALUES (${db}.next_id(), 'fn')`,
            )
          } else if (kind === 1) {
            const [sets] = await connection.query(`CALL ${db}.next_ids(97)`)
            const ids = (sets as { id: string }[][])[0]!.map((r) => r.id)
            await connection.query(`INSERT INTO ${LOG}.${table} (id, how) VALUES ?`, [
              ids.map((id) => [id, 'sp']),
            ])
          } else if (kind === 2) {
            const ids = await source.nextIds(7, 61)
            await connection.query(`INSERT INTO ${LOG}.${table} (id, how) VALUES ?`, [
              ids.map((id) => [id.toString(), 'src']),
            ])
          } else {
            await connection.query(
              `INSERT INTO ${target} (id, n) SELECT ${db}.next_id(), seq FROM seq_1_to_20`,
            )
          }
        }
      } finally {
        connection.release()
      }
    })
    await Promise.all(workers)
    await pool.query(`INSERT INTO ${LOG}.${table} (id, how) SELECT id, 'ins' FROM ${target}`)
    const { n, d } = await countLog(table)
    expect(n).toBe(8 * 12 * (1 + 97 + 61 + 20))
    expect(d).toBe(n)
    const [shards] = await rows<{ s: string }>(
      pool,
      `SELECT COUNT(DISTINCT ${db}.id_shard(id)) AS s FROM ${LOG}.${table}`,
    )
    expect(Number(shards!.s)).toBe(1)
  })
})

/**
 * The control of the hammer above: a counter that is read, then updated, in two statements repeats
 * IDs under the same concurrency, on a table-locking engine (Aria, the MariaDB default of our
 * counter) as on InnoDB, so the counts above would show a counter that is not atomic.
 */
describe.each(['InnoDB', 'Aria'])(
  'a read-then-update procedure (the usual recipe) next to ours, its table %s',
  (engine) => {
    it('only ours stays unique when both run concurrently', async () => {
      const blog = `\`${PREFIX}blog_${engine.toLowerCase()}\``
      await pool.query(`CREATE DATABASE ${blog}`)
      await pool.query(
        `CREATE TABLE ${blog}.sequences (name VARCHAR(32) PRIMARY KEY, next_val BIGINT NOT NULL DEFAULT 1) ENGINE=${engine} COLLATE utf8mb4_unicode_ci`,
      )
      await pool.query(`INSERT INTO ${blog}.sequences (name) VALUES ('post_seq')`)
      // The usual blog recipe, verbatim apart from the database name: reads next_val, then updates it.
      await pool.query(`CREATE PROCEDURE ${blog}.generate_post_id(IN user_id BIGINT, OUT post_id BIGINT)
BEGIN
    SET @service_start_time = UNIX_TIMESTAMP('2023-01-01 00:00:00.000');
    SET @shard_count = 1024;
    SET @sequence_name = 'post_seq';
    SET post_id = (
            FLOOR((UNIX_TIMESTAMP(NOW(3)) - @service_start_time) * 1000) << 20 |
            (user_id % @shard_count) << 10
        );
    SET post_id = post_id | (SELECT next_val % 1024 FROM ${blog}.sequences WHERE name = @sequence_name);
    UPDATE ${blog}.sequences SET next_val = next_val + 1 WHERE name = @sequence_name;
END`)
      const log = `${LOG}.blog_ids_${engine.toLowerCase()}`
      await pool.query(`CREATE TABLE ${log} (id BIGINT NOT NULL, who CHAR(4) NOT NULL)`)
      const ours = `\`${MARIA}8\``
      const workers = Array.from({ length: 16 }, async () => {
        const connection = await pool.getConnection()
        try {
          for (let i = 0; i < 150; i++) {
            await connection.query(`CALL ${blog}.generate_post_id(42, @blog_id)`)
            await connection.query(`CALL ${ours}.generate_id(${8192 * 5 + 8}, @our_id)`)
            await connection.query(
              `INSERT INTO ${log} (id, who) VALUES (@blog_id, 'blog'), (@our_id, 'ours')`,
            )
          }
        } finally {
          connection.release()
        }
      })
      await Promise.all(workers)
      const counts = await rows<{ who: string; n: string; d: string }>(
        pool,
        `SELECT who, COUNT(*) AS n, COUNT(DISTINCT id) AS d FROM ${log} GROUP BY who ORDER BY who`,
      )
      const byWho = Object.fromEntries(
        counts.map((c) => [c.who, { n: Number(c.n), d: Number(c.d) }]),
      )
      expect(byWho.ours).toEqual({ n: 2400, d: 2400 })
      expect(byWho.blog!.n).toBe(2400)
      expect(byWho.blog!.d).toBeLessThan(2400)
    })
  },
)

describe('the server clock steps back (injected through @shardflake_clock_offset_ms)', () => {
  function skewedPool(offsetMs: number): Pool {
    const skewed = createPool(undefined, { connectionLimit: 8 })
    // mysql2 hands the callback-style connection to this hook: the SET is queued before any query.
    skewed.on('connection', (connection) => {
      void connection.query(`SET @shardflake_clock_offset_ms = ${Math.trunc(offsetMs)}`)
    })
    return skewed
  }

  it('within the drift allowance: IDs keep coming, unique and still ascending', async () => {
    const behind = skewedPool(-400)
    try {
      const [check] = await rows<{ o: string }>(behind, 'SELECT @shardflake_clock_offset_ms AS o')
      expect(Number(check!.o)).toBe(-400)
      const normal = new MysqlSource({
        sharding,
        databases: pool,
        schemaPrefix: MARIA,
        shards: [8],
      })
      const stepped = new MysqlSource({
        sharding,
        databases: behind,
        schemaPrefix: MARIA,
        shards: [8],
      })
      const first = await normal.nextIds(8, 500)
      const after = await stepped.nextIds(8, 500)
      expect(after[0]! > first[first.length - 1]!).toBe(true)
      const mixed = await Promise.all(
        Array.from({ length: 16 }, (_, i) => (i % 2 ? normal : stepped).nextIds(8, 300)),
      )
      const all = [...first, ...after, ...mixed.flat()]
      expect(new Set(all).size).toBe(all.length)
    } finally {
      await behind.end()
    }
  })

  it('beyond it: ClockMovedBackwardsError, and the counter does not move', async () => {
    const behind = skewedPool(-5000)
    try {
      const source = new MysqlSource({
        sharding,
        databases: behind,
        schemaPrefix: MARIA,
        shards: [8],
        maxWaitMs: 100,
      })
      const [before] = await rows<{ v: string }>(pool, `SELECT v FROM \`${MARIA}8\`.sf_counter`)
      await expect(source.nextIds(8, 10)).rejects.toBeInstanceOf(ClockMovedBackwardsError)
      const [after] = await rows<{ v: string }>(pool, `SELECT v FROM \`${MARIA}8\`.sf_counter`)
      expect(after!.v).toBe(before!.v)
      expect(await sqlStateOf(behind.query(`SELECT \`${MARIA}8\`.next_id()`))).toBe(
        SIGNALS.CLOCK_BEHIND,
      )
    } finally {
      await behind.end()
    }
  })
})
