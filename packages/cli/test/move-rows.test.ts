import { randomBytes } from 'node:crypto'
import {
  defineSharding,
  InProcessSource,
  instagram,
  type ShardDirectory,
  ShardMap,
} from '@shardflake/core'
import { MysqlShardDirectory } from '@shardflake/mysql'
import { PostgresShardDirectory } from '@shardflake/postgres'
import mysql from 'mysql2/promise'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

/**
 * `shardflake move rows` on two databases of the shared server of each dialect, standing for
 * servers a and c (the row moves on separate servers are the conformance suite's).
 */
const RUN = `${process.pid}_${randomBytes(3).toString('hex')}`
const sharding = defineSharding({ layout: instagram, logicalShards: 64 })
const epoch = new Date(instagram.epoch).toISOString()
const SHIFT = Number(instagram.shifts.shard)

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

interface Dialect {
  name: 'postgres' | 'mysql'
  server: string
  url(db: string): string
  /** Raw SQL on a database (the verifier). */
  query(db: string | undefined, sql: string): Promise<Record<string, unknown>[]>
  directory(db: string): {
    directory: ShardDirectory & { create: PostgresShardDirectory['create'] }
    end(): Promise<void>
  }
}

const postgres: Dialect = {
  name: 'postgres',
  server: process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  url(db) {
    const url = new URL(this.server)
    url.pathname = `/${db}`
    return url.toString()
  },
  async query(db, sql) {
    const client = new pg.Client({ connectionString: db ? this.url(db) : this.server })
    await client.connect()
    try {
      return (await client.query(sql)).rows
    } finally {
      await client.end()
    }
  },
  directory(db) {
    const pool = new pg.Pool({ connectionString: this.url(db), max: 2 })
    return {
      directory: new PostgresShardDirectory(pool, { sharding, maxStaleMs: 100 }),
      end: () => pool.end(),
    }
  },
}

const mariadb: Dialect = {
  name: 'mysql',
  server: process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test',
  url(db) {
    const url = new URL(this.server)
    url.pathname = `/${db}`
    return url.toString()
  },
  async query(db, sql) {
    const connection = await mysql.createConnection({
      uri: db ? this.url(db) : this.server,
      supportBigNumbers: true,
      bigNumberStrings: true,
    })
    try {
      const [rows] = await connection.query(sql)
      return Array.isArray(rows) ? (rows as Record<string, unknown>[]) : []
    } finally {
      await connection.end()
    }
  },
  directory(db) {
    const pool = mysql.createPool({
      uri: this.url(db),
      supportBigNumbers: true,
      bigNumberStrings: true,
      connectionLimit: 2,
    })
    return {
      directory: new MysqlShardDirectory(pool, { sharding, maxStaleMs: 100 }),
      end: () => pool.end(),
    }
  },
}

describe.each([postgres, mariadb])('shardflake move rows ($name)', (dialect) => {
  const dbA = `sf_rows_a_${RUN}`
  const dbC = `sf_rows_c_${RUN}`
  const drop = (db: string) =>
    dialect.query(
      undefined,
      dialect.name === 'postgres'
        ? `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`
        : `DROP DATABASE IF EXISTS ${db}`,
    )
  afterAll(async () => {
    await drop(dbA)
    await drop(dbC)
  })
  const shardOf = `((id >> ${SHIFT}) & 8191)`
  const count = async (db: string, where: string) =>
    Number((await dialect.query(db, `SELECT count(*) AS n FROM posts WHERE ${where}`))[0]!.n)
  const flags = (...extra: string[]) => [
    'move',
    'rows',
    '--dialect',
    dialect.name,
    '--logical-shards',
    '64',
    '--directory',
    dialect.url(dbA),
    '--server',
    `a=${dialect.url(dbA)}`,
    `c=${dialect.url(dbC)}`,
    '--tables',
    'posts',
    ...extra,
  ]

  it('moves shards with their rows, resumes nothing twice, aborts, and fails in one typed line', async () => {
    for (const db of [dbA, dbC]) {
      await drop(db)
      await dialect.query(undefined, `CREATE DATABASE ${db}`)
      await dialect.query(
        db,
        dialect.name === 'postgres'
          ? 'CREATE TABLE posts (id bigint PRIMARY KEY, title text NOT NULL)'
          : 'CREATE TABLE posts (id BIGINT PRIMARY KEY, title TEXT NOT NULL)',
      )
    }
    const { directory, end } = dialect.directory(dbA)
    await directory.create(
      new ShardMap(sharding, [
        { from: 0, to: 31, target: 'a' },
        { from: 32, to: 63, target: 'c' },
      ]),
    )
    const source = new InProcessSource({ sharding, shards: 'all' })
    const values: string[][] = [[], []]
    for (let index = 0; index < 640; index++) {
      const shard = index % 64
      values[shard < 32 ? 0 : 1]!.push(`(${source.nextId(shard)}, 'post ${index}')`)
    }
    source.close()
    await dialect.query(dbA, `INSERT INTO posts (id, title) VALUES ${values[0]!.join(', ')}`)
    await dialect.query(dbC, `INSERT INTO posts (id, title) VALUES ${values[1]!.join(', ')}`)

    const moved = await run(
      ...flags('--shards', '0-15', '--to', 'c', '--batch-size', '50', '--delete-old-copies'),
    )
    expect(moved.stderr).toMatch(/copying posts: 50 rows/)
    expect(moved.code).toBe(0)
    expect(moved.stdout).toMatch(
      /moved logical shard\(s\) 0-15 from a to c with their rows \(from the start\): posts 160 /,
    )
    expect(moved.stdout).toMatch(/deleted 160 old cop\(ies\) from a/)
    expect(await count(dbC, `${shardOf} < 16`)).toBe(160)
    expect(await count(dbA, `${shardOf} < 16`)).toBe(0)
    expect(await count(dbA, `${shardOf} BETWEEN 16 AND 31`)).toBe(160)
    const entries = (await directory.read()).entries
    expect(entries[0]).toEqual({ from: 0, to: 15, server: 'c', state: 'serving' })

    // Moving them again finds them there already (the preset's epoch, given explicitly).
    const again = await run(...flags('--shards', '0-15', '--to', 'c', '--epoch', epoch))
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/^error: .*already serve on server "c".* \[CONFIGURATION\]$/)

    // An abort of a move that only copied: the copies go, the shards stay on a.
    await dialect.query(
      dbC,
      `INSERT INTO posts (id, title) VALUES (${sharding.layout.compose({ timestamp: Date.now(), shard: 20, sequence: 1 })}, 'partial')`,
    )
    const aborted = await run(...flags('--shards', '16-20', '--to', 'c', '--from', 'a', '--abort'))
    expect(aborted.code).toBe(0)
    expect(aborted.stdout).toMatch(/they serve on a again; 1 partial cop\(ies\) deleted from c/)
    expect(await count(dbC, `${shardOf} BETWEEN 16 AND 20`)).toBe(0)

    const failures: [string[], RegExp][] = [
      [
        flags('--shards', '16-20', '--to', 'z'),
        /to must name one of the servers.*\[CONFIGURATION\]$/,
      ],
      [
        [...flags('--shards', '16-20', '--to', 'c'), '--tables', 'nope'],
        /Table nope does not exist.*\[CONFIGURATION\]$/,
      ],
      [
        [...flags('--shards', '16-20', '--to', 'c'), '--tables', 'posts;drop'],
        /\[INVALID_IDENTIFIER\]$/,
      ],
      [flags('--shards', '16-40', '--to', 'c'), /not all on one server.*\[CONFIGURATION\]$/],
      [
        flags('--shards', '16-20', '--to', 'c', '--epoch', '2025-01-01T00:00:00Z'),
        /uses layout "instagram".*\[SHARDING_MISMATCH\]$/,
      ],
      [
        flags('--shards', '16-20', '--to', 'c', '--abort'),
        /--abort needs --from.*\[INVALID_ARGUMENT\]$/,
      ],
    ]
    for (const [argv, message] of failures) {
      const failed = await run(...argv)
      expect(failed.code, argv.join(' ')).toBe(1)
      expect(failed.stderr.split('\n').at(-1)).toMatch(/^error: /)
      expect(failed.stderr).toMatch(message)
    }
    expect((await directory.read()).entries).toEqual(entries)

    // Without --delete-old-copies the old copies stay, and the printed command deletes them.
    const kept = await run(...flags('--shards', '32-47', '--to', 'a'))
    expect(kept.code).toBe(0)
    const hint = /delete them with this command plus (--from c --delete-old-copies)\.$/m.exec(
      kept.stdout,
    )
    expect(hint).not.toBeNull()
    expect(await count(dbC, `${shardOf} BETWEEN 32 AND 47`)).toBe(160)
    const deleted = await run(...flags('--shards', '32-47', '--to', 'a'), ...hint![1]!.split(' '))
    expect(deleted.code).toBe(0)
    expect(deleted.stdout).toMatch(/deleted 160 old cop\(ies\) from c/)
    expect(await count(dbC, `${shardOf} BETWEEN 32 AND 47`)).toBe(0)
    expect(await count(dbA, `${shardOf} BETWEEN 32 AND 47`)).toBe(160)
    await end()
  }, 120_000)
})
