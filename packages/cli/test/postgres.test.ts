import { defineLayout } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

const SERVER = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const DB = 'sf_pg_cli'
const dbUrl = (() => {
  const url = new URL(SERVER)
  url.pathname = `/${DB}`
  return url.toString()
})()

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: SERVER })
  await client.connect()
  try {
    await client.query(sql)
  } finally {
    await client.end()
  }
}

beforeAll(async () => {
  await admin(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
  await admin(`CREATE DATABASE ${DB}`)
})
afterAll(async () => {
  await admin(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`)
})

describe('shardflake sql/install postgres', () => {
  const epoch = '2024-01-01T00:00:00Z'

  it('prints the SQL for a shard range', async () => {
    const result = await run(
      'sql',
      'postgres',
      '--shards',
      '3-4',
      '--epoch',
      epoch,
      '--schema-prefix',
      'app_',
    )
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/CREATE SCHEMA IF NOT EXISTS "app_3";/)
    expect(result.stdout).toMatch(/CREATE OR REPLACE FUNCTION "app_4"\.next_id\(\) RETURNS bigint/)
    expect(result.stdout).toMatch(new RegExp(`epoch_ms.*\\n.*${Date.parse(epoch)}`))
  })

  it('refuses bad input with a clear message and exit code 1', async () => {
    const hostile = await run(
      'sql',
      'postgres',
      '--shards',
      '1',
      '--epoch',
      epoch,
      '--schema-prefix',
      'x";drop',
    )
    expect(hostile.code).toBe(1)
    expect(hostile.stderr).toMatch(/^error: Refusing schema prefix name/)
    const range = await run('sql', 'postgres', '--shards', '9-3', '--epoch', epoch)
    expect(range.code).toBe(1)
    expect(range.stderr).toMatch(/ends before it starts/)
    const noEpoch = await run('sql', 'postgres', '--shards', '1')
    expect(noEpoch.code).toBe(1)
    expect(noEpoch.stderr).toMatch(/--epoch/)
    const outside = await run('sql', 'postgres', '--shards', '8190-8200', '--epoch', epoch)
    expect(outside.code).toBe(1)
    expect(outside.stderr).toMatch(/Shard 8192 is outside layout/)
  })

  it('installs with progress, idempotently, and refuses another layout (exit 1)', async () => {
    const first = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0-24',
      '--epoch',
      epoch,
    )
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(/installed 25 shard\(s\)/)
    expect(first.stderr).toMatch(/\[#+\] 25\/25 shards/)
    const again = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0-24',
      '--epoch',
      epoch,
    )
    expect(again.code).toBe(0)
    const client = new pg.Client({ connectionString: dbUrl })
    await client.connect()
    try {
      const { rows } = await client.query('SELECT shard_24.next_id()::text AS id')
      const layout = defineLayout({ epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 })
      expect(layout.shardOf(rows[0].id as string)).toBe(24)
      const meta = await client.query('SELECT count(*)::int AS n FROM shardflake.shards')
      expect(meta.rows[0].n).toBe(25)
    } finally {
      await client.end()
    }
    const conflict = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0-1',
      '--epoch',
      '2025-01-01T00:00:00Z',
    )
    expect(conflict.code).toBe(1)
    expect(conflict.stderr).toMatch(/^error: .*refusing to install layout/)
    const unreachable = await run(
      'install',
      'postgres',
      '--url',
      'postgres://postgres@127.0.0.1:1/x',
      '--shards',
      '0',
      '--epoch',
      epoch,
    )
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr).toMatch(/^error: Could not install into the database/)
  })
})
