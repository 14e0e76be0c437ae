import { defineLayout } from '@shardflake/core'
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startMariadb, type ThrowawayServer } from '../../mysql/test/helpers'
import { type CliIo, runCli } from '../src'

/**
 * `shardflake move mysql` between the shared MariaDB (A) and a second MariaDB server (B) that
 * this file starts; everything is checked with raw SQL on fresh connections.
 */
const URL_A = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
// Not under `sf_my_cli_`: mysql.test.ts drops those databases while this file may run.
const PREFIX = `sf_mycli_move_${process.pid.toString(36)}${Math.floor(Math.random() * 1296).toString(36)}_`
const epoch = '2024-01-01T00:00:00Z'
const layout = defineLayout({ epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 })
let second: ThrowawayServer
let urlB: string

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

async function query<T>(url: string, sql: string): Promise<T[]> {
  const connection = await mysql.createConnection({
    uri: url,
    supportBigNumbers: true,
    bigNumberStrings: true,
  })
  try {
    return (await connection.query(sql))[0] as T[]
  } finally {
    await connection.end()
  }
}

async function dropOwn(url: string): Promise<void> {
  const rows = await query<{ name: string }>(
    url,
    `SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE '${PREFIX.replace(/_/g, '\\\\_')}%'`,
  )
  for (const { name } of rows) await query(url, `DROP DATABASE \`${name}\``)
}

/** The counter value (ID space) an ID was made from: time << 10 | sequence. */
const counterValue = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)

beforeAll(async () => {
  second = await startMariadb()
  urlB = second.url
  await dropOwn(URL_A)
}, 60_000)
afterAll(async () => {
  await dropOwn(URL_A)
  await second?.stop()
})

describe('shardflake move mysql', () => {
  it('moves shards with progress: the old server refuses them, the new one continues above', async () => {
    const installed = await run(
      'install',
      'mysql',
      '--logical-shards',
      '8192',
      '--url',
      URL_A,
      '--shards',
      '0-3',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    )
    expect(installed.code).toBe(0)
    // A burst on A: its counter runs ahead of the clock.
    const [burst] = await query<{ v: string }>(
      URL_A,
      `SELECT CAST(\`${PREFIX}2\`.reserve_ids(500000) + 499999 AS CHAR) AS v`,
    )
    const last = BigInt(burst!.v)
    const moved = await run(
      'move',
      'mysql',
      '--logical-shards',
      '8192',
      '--from',
      URL_A,
      '--to',
      urlB,
      '--shards',
      '2-3',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    )
    expect(moved.stderr).toMatch(/2\/2 shards/)
    expect(moved.code, moved.stderr).toBe(0)
    expect(moved.stdout).toMatch(/moved 2 shard\(s\)/)
    expect(moved.stdout).toMatch(/point logical shard\(s\) 2-3 at the new server/)
    const fromB = await query<{ id: string }>(
      urlB,
      `SELECT CAST(\`${PREFIX}2\`.next_id() AS CHAR) AS id FROM seq_1_to_1000`,
    )
    for (const { id } of fromB) {
      expect(counterValue(BigInt(id)) > last).toBe(true)
      expect(layout.shardOf(BigInt(id))).toBe(2)
    }
    const refused = await query(URL_A, `SELECT \`${PREFIX}2\`.next_id()`).catch(
      (e: { sqlMessage?: string }) => e,
    )
    expect(refused).toMatchObject({ sqlState: 'SF005' })
    expect((refused as { sqlMessage?: string }).sqlMessage).toMatch(
      /^shardflake: logical shard 2 moved/,
    )
    // Shards 0-1 stay on A.
    const [kept] = await query<{ id: string }>(
      URL_A,
      `SELECT CAST(\`${PREFIX}0\`.next_id() AS CHAR) AS id`,
    )
    expect(layout.shardOf(BigInt(kept!.id))).toBe(0)
  })

  it('refuses the same server and shards that are not installed, with exit code 1', async () => {
    const same = await run(
      'move',
      'mysql',
      '--logical-shards',
      '8192',
      '--from',
      URL_A,
      '--to',
      URL_A,
      '--shards',
      '0',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    )
    expect(same.code).toBe(1)
    expect(same.stderr).toMatch(/same server/)
    const missing = await run(
      'move',
      'mysql',
      '--logical-shards',
      '8192',
      '--from',
      URL_A,
      '--to',
      urlB,
      '--shards',
      '42',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    )
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/42/)
  })
})
