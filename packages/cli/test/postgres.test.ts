import { randomBytes } from 'node:crypto'
import { type AddressInfo, createServer } from 'node:net'
import { defineLayout } from '@shardflake/core'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

const SERVER = process.env.PG_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
/** Per run, so two runs of the suite never meet. */
const DB = `sf_pg_cli_${process.pid}_${randomBytes(3).toString('hex')}`
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
  const sharding = ['--logical-shards', '64', '--epoch', epoch]

  it('prints the SQL for a shard range', async () => {
    const result = await run(
      'sql',
      'postgres',
      '--shards',
      '3-4',
      ...sharding,
      '--schema-prefix',
      'app_',
    )
    expect(result.code).toBe(0)
    expect(result.stdout).toMatch(/CREATE SCHEMA "app_3";/)
    expect(result.stdout).toMatch(/CREATE OR REPLACE FUNCTION "app_4"\.next_id\(\) RETURNS bigint/)
    expect(result.stdout).toMatch(new RegExp(`epoch_ms.*\\n.*${Date.parse(epoch)}`))
    expect(result.stdout).toMatch(/'[0-9.]+', 64\);/) // logical_shards recorded with the layout
  })

  it('refuses bad input with a clear message and exit code 1', async () => {
    const hostile = await run(
      'sql',
      'postgres',
      '--shards',
      '1',
      ...sharding,
      '--schema-prefix',
      'x";drop',
    )
    expect(hostile.code).toBe(1)
    expect(hostile.stderr).toMatch(/^error: Refusing schema prefix name/)
    const range = await run('sql', 'postgres', '--shards', '9-3', ...sharding)
    expect(range.code).toBe(1)
    expect(range.stderr).toMatch(/ends before it starts/)
    const noEpoch = await run('sql', 'postgres', '--shards', '1', '--logical-shards', '64')
    expect(noEpoch.code).toBe(1)
    expect(noEpoch.stderr).toMatch(/--epoch/)
    const noLogical = await run('sql', 'postgres', '--shards', '1', '--epoch', epoch)
    expect(noLogical.code).not.toBe(0)
    expect(noLogical.stderr).toMatch(/--logical-shards/)
    const outside = await run('sql', 'postgres', '--shards', '60-70', ...sharding)
    expect(outside.code).toBe(1)
    expect(outside.stderr).toMatch(/outside the 64 logical shards/)
    const huge = await run('sql', 'postgres', '--shards', '0-99999999999', ...sharding)
    expect(huge.code).toBe(1)
    expect(huge.stderr).toMatch(/outside the 64 logical shards/)
  })

  it('refuses a layout whose time ran out (--epoch 0), creating nothing', async () => {
    const spent = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0',
      '--logical-shards',
      '64',
      '--epoch',
      '0',
      '--schema',
      'sf_spent',
      '--schema-prefix',
      'spent_',
    )
    expect(spent.code).not.toBe(0)
    expect(spent.stderr).toMatch(/^error: .*can no longer make IDs/)
    const client = new pg.Client({ connectionString: dbUrl })
    await client.connect()
    try {
      const { rows } = await client.query(
        `SELECT to_regnamespace('sf_spent') IS NOT NULL AS common, to_regnamespace('spent_0') IS NOT NULL AS shard`,
      )
      expect(rows[0]).toEqual({ common: false, shard: false })
    } finally {
      await client.end()
    }
  })

  it('installs with progress, idempotently, and refuses another layout or logicalShards (exit 1)', async () => {
    const first = await run('install', 'postgres', '--url', dbUrl, '--shards', '0-24', ...sharding)
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(
      /installed 25 shard\(s\) of layout "custom" with logicalShards 64 \(25 created, 0 updated/,
    )
    expect(first.stderr).toMatch(/\[#+\] 25\/25 shards/)
    const again = await run('install', 'postgres', '--url', dbUrl, '--shards', '0-24', ...sharding)
    expect(again.code).toBe(0)
    expect(again.stdout).toMatch(/\(0 created, 25 updated/)
    const client = new pg.Client({ connectionString: dbUrl })
    await client.connect()
    try {
      const { rows } = await client.query('SELECT shard_24.next_id()::text AS id')
      const layout = defineLayout({ epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 })
      expect(layout.shardOf(rows[0].id as string)).toBe(24)
      const meta = await client.query(
        'SELECT (SELECT count(*)::int FROM shardflake.shards) AS n, logical_shards FROM shardflake.layout',
      )
      expect(meta.rows[0]).toEqual({ n: 25, logical_shards: 64 })
    } finally {
      await client.end()
    }
    const otherLayout = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0-1',
      '--logical-shards',
      '64',
      '--epoch',
      '2025-01-01T00:00:00Z',
    )
    expect(otherLayout.code).toBe(1)
    expect(otherLayout.stderr).toMatch(
      /^error: database "sf_pg_cli_\w+" uses layout "custom".*2024-01-01.*this application uses layout "custom".*2025-01-01/,
    )
    const otherCount = await run(
      'install',
      'postgres',
      '--url',
      dbUrl,
      '--shards',
      '0-1',
      '--logical-shards',
      '128',
      '--epoch',
      epoch,
    )
    expect(otherCount.code).toBe(1)
    expect(otherCount.stderr).toMatch(
      /with logicalShards 64, but this application uses .* with logicalShards 128/,
    )
    const unreachable = await run(
      'install',
      'postgres',
      '--url',
      'postgres://postgres@127.0.0.1:1/x',
      '--shards',
      '0',
      ...sharding,
    )
    expect(unreachable.code).toBe(1)
    expect(unreachable.stderr).toMatch(
      /^error: Could not connect for the install \(--url\) \(ECONNREFUSED\): the server is down/,
    )
  })

  it('a port that accepts and never answers: a typed error within --connect-timeout-ms', async () => {
    // A TCP server that accepts connections and says nothing (another service, a stopped server).
    const silent = createServer((socket) => socket.on('error', () => undefined))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const { port } = silent.address() as AddressInfo
    try {
      const url = `postgres://postgres@127.0.0.1:${port}/x`
      const install = await run(
        'install',
        'postgres',
        '--url',
        url,
        '--shards',
        '0',
        ...sharding,
        '--connect-timeout-ms',
        '300',
      )
      expect(install.code).toBe(1)
      expect(install.stderr).toBe(
        `error: Could not connect for the install (--url): 127.0.0.1:${port} accepted the connection but did not complete a PostgreSQL handshake within 300 ms. Check that the URL names a PostgreSQL server and its port (or raise --connect-timeout-ms). [TIMED_OUT]`,
      )
      const move = await run(
        'move',
        'postgres',
        '--from',
        dbUrl,
        '--to',
        url,
        '--shards',
        '0',
        ...sharding,
        '--connect-timeout-ms',
        '300',
      )
      expect(move.code).toBe(1)
      expect(move.stderr).toMatch(
        /^error: Could not connect for the move \(--to\): .* did not complete a PostgreSQL handshake within 300 ms/,
      )
    } finally {
      silent.close()
    }
  })

  it('a database that does not exist: a configuration error naming it, not a retryable one', async () => {
    const url = new URL(SERVER)
    url.pathname = `/${DB}_missing`
    const missing = await run(
      'install',
      'postgres',
      '--url',
      url.toString(),
      '--shards',
      '0',
      ...sharding,
    )
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(
      new RegExp(
        `^error: Could not connect for the install \\(--url\\): database "${DB}_missing" does not exist on that server \\(3D000\\)\\. Check the database name`,
      ),
    )
  })
})
