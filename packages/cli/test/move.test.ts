import { randomBytes } from 'node:crypto'
import { defineLayout } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

const SERVER = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
/** Per run, so two runs of the suite never meet. */
const RUN = `${process.pid}_${randomBytes(3).toString('hex')}`
const DB_A = `sf_pg_cli_move_a_${RUN}`
const DB_B = `sf_pg_cli_move_b_${RUN}`
const dbUrl = (db: string) => {
  const url = new URL(SERVER)
  url.pathname = `/${db}`
  return url.toString()
}
const urlA = dbUrl(DB_A)
const urlB = dbUrl(DB_B)
const epoch = '2024-01-01T00:00:00Z'
const layout = defineLayout({ epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 })

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

/** Raw SQL on a fresh connection: the verifier, not the code under test. */
async function query<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    return (await client.query(sql)).rows as T[]
  } finally {
    await client.end()
  }
}

const sequenceValue = (id: bigint) => ((id >> 23n) << 10n) | (id & 1023n)

beforeAll(async () => {
  for (const db of [DB_A, DB_B]) {
    await query(SERVER, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
    await query(SERVER, `CREATE DATABASE ${db}`)
  }
})
afterAll(async () => {
  for (const db of [DB_A, DB_B]) await query(SERVER, `DROP DATABASE IF EXISTS ${db} WITH (FORCE)`)
})

describe('shardflake move postgres', () => {
  it('moves shards with progress: the old database refuses them, the new one continues above', async () => {
    const installed = await run(
      'install',
      'postgres',
      '--url',
      urlA,
      '--shards',
      '0-3',
      '--epoch',
      epoch,
      '--logical-shards',
      '64',
    )
    expect(installed.code).toBe(0)
    // A burst on A: its sequence runs ahead of the clock.
    const burst = await query<{ id: string }>(
      urlA,
      'SELECT max(x)::text AS id FROM shard_2.next_ids(500000) x',
    )
    const last = sequenceValue(BigInt(burst[0]!.id))
    const moved = await run(
      'move',
      'postgres',
      '--from',
      urlA,
      '--to',
      urlB,
      '--shards',
      '2-3',
      '--epoch',
      epoch,
      '--logical-shards',
      '64',
    )
    expect(moved.stderr).not.toMatch(/^error/m)
    expect(moved.code).toBe(0)
    expect(moved.stdout).toMatch(
      /^moved 2 shard\(s\) of layout "custom" \(schemas shard_2..shard_3/,
    )
    expect(moved.stdout).toMatch(/point logical shard\(s\) 2-3 at the new database/)
    expect(moved.stderr).toMatch(/\[#+\] 2\/2 shards/)
    const refused = await query(urlA, 'SELECT shard_2.next_id()').catch((e: unknown) => e)
    expect((refused as { code?: string }).code).toBe('SF005')
    const fresh = await query<{ id: string }>(
      urlB,
      'SELECT x::text AS id FROM shard_2.next_ids(1000) x',
    )
    for (const row of fresh) {
      expect(sequenceValue(BigInt(row.id)) > last).toBe(true)
      expect(layout.shardOf(row.id)).toBe(2)
    }
    const meta = await query<{ shard: number; moved_to: string }>(
      urlA,
      'SELECT shard, moved_to FROM shardflake.shards WHERE retired_at IS NOT NULL ORDER BY shard',
    )
    expect(meta.map((row) => row.shard)).toEqual([2, 3])
    expect(meta[0]!.moved_to).toMatch(/^database sf_pg_cli_move_b/)
    // Run again: safe, and says it resumed.
    const again = await run(
      'move',
      'postgres',
      '--from',
      urlA,
      '--to',
      urlB,
      '--shards',
      '2-3',
      '--epoch',
      epoch,
      '--logical-shards',
      '64',
    )
    expect(again.code).toBe(0)
    expect(again.stdout).toMatch(/2 of them resumed/)
    // Installing them on A again is refused.
    const reinstall = await run(
      'install',
      'postgres',
      '--url',
      urlA,
      '--shards',
      '2',
      '--epoch',
      epoch,
      '--logical-shards',
      '64',
    )
    expect(reinstall.code).toBe(1)
    expect(reinstall.stderr).toMatch(/^error: Logical shard\(s\) 2(-3)? moved from this database/)
  })

  it('refuses bad input and unreachable servers with a clear message and exit code 1', async () => {
    const move = (...extra: string[]) =>
      run('move', 'postgres', '--shards', '1', '--epoch', epoch, '--logical-shards', '64', ...extra)
    const same = await move('--from', urlA, '--to', urlA)
    expect(same.code).toBe(1)
    expect(same.stderr).toMatch(/^error: from and to are the same database/)
    const missing = await run(
      'move',
      'postgres',
      '--from',
      urlA,
      '--to',
      urlB,
      '--shards',
      '9',
      '--epoch',
      epoch,
      '--logical-shards',
      '64',
    )
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/^error: Logical shard\(s\) 9 not installed/)
    const otherEpoch = await run(
      'move',
      'postgres',
      '--from',
      urlA,
      '--to',
      urlB,
      '--shards',
      '1',
      '--epoch',
      '2025-01-01T00:00:00Z',
      '--logical-shards',
      '64',
    )
    expect(otherEpoch.code).toBe(1)
    expect(otherEpoch.stderr).toMatch(
      /^error: The old database "sf_pg_cli_move_a_\w+" \(from\) uses layout/,
    )
    const hostile = await move('--from', urlA, '--to', urlB, '--schema-prefix', 'x";drop')
    expect(hostile.code).toBe(1)
    expect(hostile.stderr).toMatch(/^error: Refusing schema prefix name/)
    const noEpoch = await run(
      'move',
      'postgres',
      '--from',
      urlA,
      '--to',
      urlB,
      '--shards',
      '1',
      '--logical-shards',
      '64',
    )
    expect(noEpoch.code).toBe(1)
    expect(noEpoch.stderr).toMatch(/--epoch/)
    const noTo = await move('--from', urlA)
    expect(noTo.code).toBe(1)
    expect(noTo.stderr).toMatch(/required option '--to <url>' not specified/)
    const badTimeout = await move('--from', urlA, '--to', urlB, '--lock-timeout-ms', 'soon')
    expect(badTimeout.code).toBe(1)
    expect(badTimeout.stderr).toMatch(/--lock-timeout-ms must be a whole number/)
    const unreachable = await move('--from', urlA, '--to', 'postgres://postgres@127.0.0.1:1/x')
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr).toMatch(
      /^error: Could not connect for the move \(--to\) \(ECONNREFUSED\): the server is down/,
    )
    // Shard 1 still lives on A, and only there.
    const [row] = await query<{ id: string }>(urlA, 'SELECT shard_1.next_id()::text AS id')
    expect(layout.shardOf(row!.id)).toBe(1)
    const [b] = await query<{ present: boolean }>(
      urlB,
      `SELECT to_regnamespace('shard_1') IS NOT NULL AS present`,
    )
    expect(b!.present).toBe(false)
  })
})
