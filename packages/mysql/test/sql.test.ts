import {
  defineLayout,
  InvalidIdentifierError,
  InvalidLayoutError,
  instagram,
  twitter,
} from '@shardflake/core'
import type { Pool } from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  generateMysqlSql,
  type MysqlDialect,
  mysqlFenceStatements,
  mysqlShardStatements,
  mysqlTriggerSql,
  ticketServerStatements,
} from '../src'
import { createPool, dropDatabases, rows } from './helpers'

const PREFIX = 'sf_my_sql_'
const layout = defineLayout({
  name: 'acme',
  epoch: '2020-01-01T00:00:00Z',
  timeBits: 41,
  shardBits: 13,
  sequenceBits: 10,
})

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
      generateMysqlSql({ layout: instagram, shards: [5], dialect: 'mariadb' }),
    ).toMatchFileSnapshot('__snapshots__/shard-mariadb.sql')
  })

  it('mysql8', async () => {
    await expect(
      generateMysqlSql({ layout: instagram, shards: [5], dialect: 'mysql8' }),
    ).toMatchFileSnapshot('__snapshots__/shard-mysql8.sql')
  })

  it('triggers and ticket servers, per dialect', async () => {
    for (const dialect of ['mariadb', 'mysql8'] as const) {
      const sql = [
        ...mysqlTriggerSql({
          layout: instagram,
          dialect,
          database: 'app',
          table: 'posts',
          shard: 5,
        }),
        ...ticketServerStatements({ sequences: ['photos'], dialect }),
      ].join(';\n\n')
      await expect(`${sql};\n`).toMatchFileSnapshot(`__snapshots__/extras-${dialect}.sql`)
    }
  })

  it('the fence of a moved shard, per dialect', async () => {
    for (const dialect of ['mariadb', 'mysql8'] as const) {
      const sql = mysqlFenceStatements({ layout: instagram, dialect }, 5, "server db-b:3306 'x'")
      await expect(`${sql.join(';\n\n')};\n`).toMatchFileSnapshot(
        `__snapshots__/fence-${dialect}.sql`,
      )
    }
  })

  it('differs between the dialects where the servers differ', () => {
    const maria = generateMysqlSql({ layout: instagram, shards: [5], dialect: 'mariadb' })
    const my8 = generateMysqlSql({ layout: instagram, shards: [5], dialect: 'mysql8' })
    expect(maria).toContain('CREATE OR REPLACE FUNCTION')
    expect(maria).toContain('seq_0_to_999999')
    expect(maria).toContain('ENGINE=Aria TRANSACTIONAL=0')
    expect(my8).not.toContain('CREATE OR REPLACE')
    expect(my8).toContain('JSON_TABLE')
    expect(my8).toContain('ENGINE=InnoDB')
    for (const sql of [maria, my8]) {
      expect(sql).toContain('SYSDATE(3)')
      expect(sql).not.toMatch(/NOW\(/)
    }
  })
})

describe('validation', () => {
  it('refuses identifiers that are not plain names', () => {
    for (const bad of ['shard-', 'Shard_', 'a`b', 'x; DROP DATABASE test; --', '', '1abc']) {
      expect(() => mysqlShardStatements({ layout, schemaPrefix: bad }, 1)).toThrow(
        InvalidIdentifierError,
      )
    }
    expect(() => mysqlTriggerSql({ layout, database: 'app', table: 'po`sts', shard: 1 })).toThrow(
      InvalidIdentifierError,
    )
    expect(() => ticketServerStatements({ sequences: ['Photos'] })).toThrow(InvalidIdentifierError)
  })

  it('refuses decode-only layouts and another field order', () => {
    expect(() => mysqlShardStatements({ layout: twitter }, 1)).toThrow(InvalidLayoutError)
    const reordered = defineLayout({
      epoch: 0,
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
      order: ['time', 'sequence', 'worker', 'shard'],
    })
    expect(() => mysqlShardStatements({ layout: reordered }, 1)).toThrow(InvalidLayoutError)
  })
})

async function install(dialect: MysqlDialect, prefix: string, shards: number[]) {
  for (const shard of shards) {
    for (const statement of mysqlShardStatements(
      { layout, dialect, schemaPrefix: prefix },
      shard,
    )) {
      await pool.query(statement)
    }
  }
}

describe.each(['mariadb', 'mysql8'] as const)('the %s SQL, executed', (dialect) => {
  const prefix = `${PREFIX}${dialect}_shard_`
  const db = (shard: number) => `\`${prefix}${shard}\``

  beforeAll(async () => {
    await install(dialect, prefix, [3, 4100])
  })

  it('next_id() makes IDs that decode in TypeScript to the shard, made now', async () => {
    const before = Date.now()
    const [row] = await rows<{ a: string; b: string }>(
      pool,
      `SELECT ${db(3)}.next_id() AS a, ${db(4100)}.next_id() AS b`,
    )
    const after = Date.now()
    expect(typeof row!.a).toBe('string')
    for (const [value, shard] of [
      [row!.a, 3],
      [row!.b, 4100],
    ] as const) {
      const decoded = layout.decompose(value)
      expect(decoded.shard).toBe(shard)
      expect(decoded.timestampMs).toBeGreaterThanOrEqual(before - 50)
      expect(decoded.timestampMs).toBeLessThanOrEqual(after + 50)
    }
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

  it('generate_id(shard_key, OUT id): the seed shape, checked against the key', async () => {
    await pool.query(`CALL ${db(3)}.generate_id(?, @sf_out)`, [8192 * 7 + 3])
    const [row] = await rows<{ id: string }>(pool, 'SELECT @sf_out AS id')
    expect(layout.shardOf(row!.id)).toBe(3)
    await expect(pool.query(`CALL ${db(3)}.generate_id(4, @sf_out)`)).rejects.toThrow(
      /shardflake:SHARD/,
    )
  })

  it('re-running the SQL keeps the counter; another layout is refused by the script', async () => {
    const [before] = await rows<{ v: string }>(pool, `SELECT v FROM ${db(3)}.sf_counter`)
    await install(dialect, prefix, [3])
    const [after] = await rows<{ v: string }>(pool, `SELECT v FROM ${db(3)}.sf_counter`)
    expect(BigInt(after!.v)).toBe(BigInt(before!.v))
    const other = defineLayout({
      epoch: '2021-01-01T00:00:00Z',
      timeBits: 41,
      shardBits: 13,
      sequenceBits: 10,
    })
    const statements = mysqlShardStatements({ layout: other, dialect, schemaPrefix: prefix }, 3)
    await expect(
      (async () => {
        for (const statement of statements) await pool.query(statement)
      })(),
    ).rejects.toThrow(/shardflake:LAYOUT/)
    const [meta] = await rows<{ value: string }>(
      pool,
      `SELECT value FROM ${db(3)}.sf_meta WHERE name = 'layout_key'`,
    )
    expect(meta!.value).toContain(`epoch=${layout.epoch}`)
  })

  it('the BEFORE INSERT trigger fills a zero or NULL id and keeps a given one', async () => {
    const app = `${PREFIX}${dialect}_app`
    await pool.query(`CREATE DATABASE IF NOT EXISTS \`${app}\``)
    await pool.query(
      `CREATE TABLE \`${app}\`.posts (id BIGINT NOT NULL DEFAULT 0 PRIMARY KEY, body VARCHAR(20) NOT NULL)`,
    )
    for (const statement of mysqlTriggerSql({
      layout,
      dialect,
      schemaPrefix: prefix,
      database: app,
      table: 'posts',
      shard: 4100,
    })) {
      await pool.query(statement)
    }
    await pool.query(`INSERT INTO \`${app}\`.posts (body) VALUES ('omitted'), ('omitted 2')`)
    await pool.query(
      `INSERT INTO \`${app}\`.posts (id, body) VALUES (NULL, 'null'), (0, 'zero'), (42, 'given')`,
    )
    const all = await rows<{ id: string; body: string }>(
      pool,
      `SELECT id, body FROM \`${app}\`.posts`,
    )
    expect(all).toHaveLength(5)
    for (const row of all) {
      if (row.body === 'given') expect(row.id).toBe('42')
      else expect(layout.shardOf(row.id)).toBe(4100)
    }
  })
})
