import {
  ConfigurationError,
  defineLayout,
  defineSharding,
  InvalidIdentifierError,
  InvalidLayoutError,
  instagram,
  ShardOutOfRangeError,
  twitter,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type MysqlDialect, mysqlSql, mysqlTriggerSql, SIGNALS, ticketServerSql } from '../src'
import { fenceStatements } from '../src/sql/fence'
import { resolveSqlOptions } from '../src/sql/options'
import { createPool, dropDatabases, RUN, rows, runDdl, sqlStateOf } from './helpers'

const PREFIX = `sf_my_sql_${RUN}_`
const layout = defineLayout({
  name: 'acme',
  epoch: '2020-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})
const sharding = defineSharding({ layout, logicalShards: 8192 })
const pinned = defineSharding({ layout: instagram, logicalShards: 2000 })

let pool: Pool

beforeAll(async () => {
  pool = createPool()
  await dropDatabases(pool, PREFIX)
})

afterAll(async () => {
  await dropDatabases(pool, PREFIX)
  await pool.end()
})

describe('generated SQL is pinned', () => {
  it('mariadb', async () => {
    await expect(
      mysqlSql({ sharding: pinned, shards: [5], dialect: 'mariadb' }).script,
    ).toMatchFileSnapshot('__snapshots__/shard-mariadb.sql')
  })

  it('mysql8', async () => {
    await expect(
      mysqlSql({ sharding: pinned, shards: [5], dialect: 'mysql8' }).script,
    ).toMatchFileSnapshot('__snapshots__/shard-mysql8.sql')
  })

  it('triggers and ticket servers, per dialect', async () => {
    for (const dialect of ['mariadb', 'mysql8'] as const) {
      const trigger = mysqlTriggerSql({
        sharding: pinned,
        dialect,
        database: 'app',
        table: 'posts',
        shard: 5,
      })
      const tickets = ticketServerSql({ sequences: ['photos'], dialect })
      await expect(`${trigger.script}\n${tickets.script}`).toMatchFileSnapshot(
        `__snapshots__/extras-${dialect}.sql`,
      )
    }
  })

  it('the fence of a moved shard, per dialect', async () => {
    for (const dialect of ['mariadb', 'mysql8'] as const) {
      const o = resolveSqlOptions({ sharding: pinned, dialect })
      const sql = fenceStatements(o, 5, "server db-b:3306 'x'")
      await expect(`${sql.join(';\n\n')};\n`).toMatchFileSnapshot(
        `__snapshots__/fence-${dialect}.sql`,
      )
    }
  })

  it('differs between the dialects where the servers differ', () => {
    const maria = mysqlSql({ sharding: pinned, shards: [5], dialect: 'mariadb' }).script
    const my8 = mysqlSql({ sharding: pinned, shards: [5], dialect: 'mysql8' }).script
    expect(maria).toContain('CREATE OR REPLACE FUNCTION')
    expect(maria).toContain('seq_0_to_999999')
    expect(maria).toContain('ENGINE=Aria TRANSACTIONAL=0')
    expect(my8).not.toContain('CREATE OR REPLACE')
    expect(my8).toContain('JSON_TABLE')
    expect(my8).toContain('ENGINE=InnoDB')
    for (const sql of [maria, my8]) {
      expect(sql).toContain('SYSDATE(3)')
      expect(sql).not.toMatch(/NOW\(/)
      expect(sql).toContain("('logical_shards', '2000')")
    }
  })
})

describe('validation', () => {
  it('refuses identifiers that are not plain names', () => {
    for (const bad of ['shard-', 'Shard_', 'a`b', 'x; DROP DATABASE test; --', '', '1abc']) {
      expect(() => mysqlSql({ sharding, shards: [1], schemaPrefix: bad })).toThrow(
        InvalidIdentifierError,
      )
    }
    expect(() => mysqlTriggerSql({ sharding, database: 'app', table: 'po`sts', shard: 1 })).toThrow(
      InvalidIdentifierError,
    )
    expect(() => ticketServerSql({ sequences: ['Photos'] })).toThrow(InvalidIdentifierError)
  })

  it('refuses decode-only layouts and another field order', () => {
    expect(() =>
      mysqlSql({ sharding: defineSharding({ layout: twitter, logicalShards: 16 }), shards: [1] }),
    ).toThrow(InvalidLayoutError)
    const reordered = defineLayout({
      epoch: '2020-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
      order: ['time', 'sequence', 'worker', 'shard'],
    })
    expect(() =>
      mysqlSql({ sharding: defineSharding({ layout: reordered, logicalShards: 8 }), shards: [1] }),
    ).toThrow(InvalidLayoutError)
  })

  it('needs a sharding, and says logicalShards', () => {
    expect(() => mysqlSql({ shards: [1] } as never)).toThrow(ConfigurationError)
    expect(() => mysqlSql({ layout, shards: [1] } as never)).toThrow(/logicalShards/)
  })

  it('checks a shard list against logicalShards before expanding it', () => {
    expect(() => mysqlSql({ sharding, shards: '0-99999999999' })).toThrow(ShardOutOfRangeError)
    expect(() => mysqlSql({ sharding, shards: [8192] })).toThrow(ShardOutOfRangeError)
  })

  it('reads maxDriftMs with bounds', () => {
    expect(() => mysqlSql({ sharding, shards: [1], maxDriftMs: 1e17 })).toThrow(
      /maxDriftMs must be an integer number of ms from 1 to 86400000/,
    )
  })
})

async function install(dialect: MysqlDialect, prefix: string, shards: number[], using = sharding) {
  await runDdl(pool, mysqlSql({ sharding: using, dialect, schemaPrefix: prefix, shards }))
}

describe.each(['mariadb', 'mysql8'] as const)('the %s SQL, executed', (dialect) => {
  const prefix = `${PREFIX}${dialect.slice(0, 2)}_`
  const db = (shard: number) => `\`${prefix}${shard}\``

  beforeAll(async () => {
    await install(dialect, prefix, [0, 3, 4100, 8187, 8191])
  })

  it('next_id() makes IDs of the shard', async () => {
    const [row] = await rows<{ a: string; b: string }>(
      pool,
      `SELECT ${db(3)}.next_id() AS a, ${db(4100)}.next_id() AS b`,
    )
    expect(typeof row!.a).toBe('string')
    expect(layout.shardOf(row!.a)).toBe(3)
    expect(layout.shardOf(row!.b)).toBe(4100)
  })

  it('the decode helpers agree with the TypeScript codec', async () => {
    const [row] = await rows<Record<string, string>>(
      pool,
      `SELECT @i := ${db(4100)}.next_id() AS id, ${db(4100)}.id_shard(@i) AS shard,
              ${db(4100)}.id_sequence(@i) AS seq, ${db(4100)}.id_unix_ms(@i) AS ms`,
    )
    const decoded = layout.decompose(row!.id!)
    expect(Number(row!.shard)).toBe(decoded.shard)
    expect(Number(row!.seq)).toBe(decoded.sequence)
    expect(Number(row!.ms)).toBe(decoded.timestampMs)
  })

  it('next_ids(n) returns n ascending IDs of the shard as one result set', async () => {
    const [sets] = await pool.query(`CALL ${db(3)}.next_ids(1000)`)
    const ids = (sets as { id: string }[][])[0]!.map((r) => BigInt(r.id))
    expect(ids).toHaveLength(1000)
    expect(new Set(ids).size).toBe(1000)
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true)
    for (const id of ids) expect(layout.shardOf(id)).toBe(3)
  })

  it('a 100k batch in one statement: unique, past 1024 IDs per ms, never wrapping', async () => {
    const [sets] = await pool.query(`CALL ${db(4100)}.next_ids(100000)`)
    const ids = (sets as { id: string }[][])[0]!.map((r) => BigInt(r.id))
    expect(new Set(ids).size).toBe(100_000)
    const perMs = new Map<number, number>()
    for (const id of ids) {
      const { time } = layout.decompose(id)
      perMs.set(time, (perMs.get(time) ?? 0) + 1)
    }
    expect(Math.max(...perMs.values())).toBeLessThanOrEqual(1024)
    expect(perMs.size).toBeGreaterThanOrEqual(Math.ceil(100_000 / 1024))
  })

  it('a function call per row in one statement stays unique (SYSDATE, not a frozen NOW)', async () => {
    const [row] = await rows<{ n: string; d: string }>(
      pool,
      `SELECT COUNT(*) AS n, COUNT(DISTINCT ${db(3)}.next_id()) AS d FROM (
         SELECT 1 FROM information_schema.COLUMNS a, (SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3) b LIMIT 5000) t`,
    )
    expect(Number(row!.n)).toBe(5000)
    expect(Number(row!.d)).toBe(5000)
  })

  it('generate_id(shard_key, OUT id) checks the key, NULL and non-numbers included, under any sql_mode', async () => {
    await pool.query(`CALL ${db(3)}.generate_id(?, @sf_out)`, [8192 * 7 + 3])
    const [row] = await rows<{ id: string }>(pool, 'SELECT @sf_out AS id')
    expect(layout.shardOf(row!.id)).toBe(3)
    expect(await sqlStateOf(pool.query(`CALL ${db(3)}.generate_id(4, @sf_out)`))).toBe(
      SIGNALS.WRONG_SHARD,
    )
    const connection = await pool.getConnection()
    try {
      await connection.query("SET SESSION sql_mode = ''")
      // '' and NULL would be the key 0 through a BIGINT parameter under a lax mode: refused.
      for (const key of ["''", "'  '", 'NULL']) {
        expect(await sqlStateOf(connection.query(`CALL ${db(0)}.generate_id(${key}, @o)`))).toBe(
          SIGNALS.MISSING_KEY,
        )
      }
      // Other text is a key like any other: hashed, and refused unless its shard is this one.
      for (const key of ['abc', ' 0', '1e3']) {
        const state = await sqlStateOf(connection.query(`CALL ${db(0)}.generate_id(?, @o)`, [key]))
        expect(state).toBe(sharding.shardForKey(key) === 0 ? undefined : SIGNALS.WRONG_SHARD)
      }
      // Integers of any width go where core puts them: 2^64 and 10^40 are multiples of 8192.
      for (const key of ['18446744073709551616', `1${'0'.repeat(40)}`]) {
        expect(sharding.shardForKey(key)).toBe(0)
        await connection.query(`CALL ${db(0)}.generate_id(?, @o)`, [key])
      }
      expect(
        await sqlStateOf(connection.query(`CALL ${db(0)}.generate_id(?, @o)`, ['5'.repeat(1025)])),
      ).toBe(SIGNALS.INVALID_KEY)
      await connection.query(`CALL ${db(0)}.generate_id(0, @zero)`) // 0 itself is a key of shard 0
      await connection.query(`CALL ${db(3)}.generate_id('${8192 * 9 + 3}', @o)`)
      const [lax] = await connection.query('SELECT CAST(@o AS CHAR) AS id')
      expect(layout.shardOf((lax as { id: string }[])[0]!.id)).toBe(3)
      // Negative keys and the largest unsigned 64-bit key go where core puts them.
      await connection.query(`CALL ${db(8192 - 5)}.generate_id('-5', @o)`)
      await connection.query(`CALL ${db(8191)}.generate_id('18446744073709551615', @o)`)
      expect(await sqlStateOf(connection.query(`SELECT ${db(3)}.reserve_ids(NULL)`))).toBe(
        SIGNALS.COUNT,
      )
    } finally {
      connection.destroy()
    }
  })

  it('re-running the SQL keeps the counter; another sharding is refused by the script', async () => {
    const [before] = await rows<{ v: string }>(pool, `SELECT v FROM ${db(3)}.sf_counter`)
    await install(dialect, prefix, [3])
    const [after] = await rows<{ v: string }>(pool, `SELECT v FROM ${db(3)}.sf_counter`)
    expect(BigInt(after!.v)).toBe(BigInt(before!.v))
    const fewer = defineSharding({ layout, logicalShards: 4096 })
    expect(await sqlStateOf(install(dialect, prefix, [3], fewer))).toBe(SIGNALS.SHARDING_MISMATCH)
    const other = defineLayout({
      epoch: '2021-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const otherSharding = defineSharding({ layout: other, logicalShards: 8192 })
    expect(await sqlStateOf(install(dialect, prefix, [3], otherSharding))).toBe(
      SIGNALS.SHARDING_MISMATCH,
    )
    const meta = await rows<{ name: string; value: string }>(
      pool,
      `SELECT name, value FROM ${db(3)}.sf_meta WHERE name IN ('layout_key', 'logical_shards')`,
    )
    const byName = Object.fromEntries(meta.map((m) => [m.name, m.value]))
    expect(byName.layout_key).toContain(`epoch=${layout.epoch}`)
    expect(byName.logical_shards).toBe('8192')
  })

  it('the BEFORE INSERT trigger fills a zero, NULL or omitted id, under a lax sql_mode too', async () => {
    const app = `${PREFIX}${dialect.slice(0, 2)}_app`
    await pool.query(`CREATE DATABASE IF NOT EXISTS \`${app}\``)
    await pool.query(
      `CREATE TABLE \`${app}\`.posts (id BIGINT NOT NULL DEFAULT 0 PRIMARY KEY, body VARCHAR(20) NOT NULL)`,
    )
    await pool.query(
      `CREATE TABLE \`${app}\`.bare (id BIGINT NOT NULL PRIMARY KEY, body VARCHAR(20) NOT NULL)`,
    )
    for (const table of ['posts', 'bare']) {
      await runDdl(
        pool,
        mysqlTriggerSql({
          sharding,
          dialect,
          schemaPrefix: prefix,
          database: app,
          table,
          shard: 4100,
        }),
      )
    }
    await pool.query(`INSERT INTO \`${app}\`.posts (body) VALUES ('omitted'), ('omitted 2')`)
    await pool.query(
      `INSERT INTO \`${app}\`.posts (id, body) VALUES (NULL, 'null'), (0, 'zero'), (42, 'given')`,
    )
    const connection = await pool.getConnection()
    try {
      await connection.query("SET SESSION sql_mode = ''")
      await connection.query(`INSERT INTO \`${app}\`.bare (body) VALUES ('lax'), ('lax 2')`)
      await connection.query(
        `INSERT INTO \`${app}\`.bare (id, body) VALUES (NULL, 'lax null'), ('', 'lax empty')`,
      )
    } finally {
      connection.destroy()
    }
    for (const table of ['posts', 'bare']) {
      const all = await rows<{ id: string; body: string }>(
        pool,
        `SELECT id, body FROM \`${app}\`.${table}`,
      )
      expect(all).toHaveLength(table === 'posts' ? 5 : 4)
      for (const row of all) {
        if (row.body === 'given') expect(row.id).toBe('42')
        else expect(layout.shardOf(row.id)).toBe(4100)
      }
    }
  })
})
