import { type AddressInfo, createServer } from 'node:net'
import { defineLayout } from '@shardflake/core'
import mysql from 'mysql2/promise'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

const URL_ = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test'
const RUN = `${process.pid.toString(36)}${Math.floor(Math.random() * 1296).toString(36)}`
const PREFIX = `sf_my_cli_${RUN}_s_`

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

const pool = mysql.createPool({ uri: URL_, supportBigNumbers: true, bigNumberStrings: true })

async function dropOwn(): Promise<void> {
  const [rows] = await pool.query(
    'SELECT SCHEMA_NAME AS name FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?',
    [`${PREFIX.replace(/_/g, '\\_')}%`],
  )
  for (const { name } of rows as { name: string }[]) await pool.query(`DROP DATABASE \`${name}\``)
}

beforeAll(dropOwn)
afterAll(async () => {
  await dropOwn()
  await pool.end()
})

describe('shardflake sql/install mysql', () => {
  const epoch = '2024-01-01T00:00:00Z'

  it('prints the SQL for a shard range, per dialect', async () => {
    const maria = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '3-4',
      '--epoch',
      epoch,
      '--schema-prefix',
      'app_',
    )
    expect(maria.code).toBe(0)
    expect(maria.stdout).toMatch(/^DELIMITER \$\$/)
    expect(maria.stdout).toContain("('logical_shards', '8192')")
    expect(maria.stdout).toContain('CREATE DATABASE IF NOT EXISTS `app_3`$$')
    expect(maria.stdout).toContain('CREATE OR REPLACE FUNCTION `app_4`.`next_id`() RETURNS BIGINT')
    expect(maria.stdout).toContain(`- ${Date.parse(epoch)}) / 1)`)
    const my8 = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '3',
      '--epoch',
      epoch,
      '--dialect',
      'mysql8',
    )
    expect(my8.code).toBe(0)
    expect(my8.stdout).toContain('DROP FUNCTION IF EXISTS `shard_3`.`next_id`$$')
    expect(my8.stdout).not.toContain('CREATE OR REPLACE')
  })

  it('refuses bad input with a clear message and exit code 1', async () => {
    const hostile = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '1',
      '--epoch',
      epoch,
      '--schema-prefix',
      'x`;drop',
    )
    expect(hostile.code).toBe(1)
    expect(hostile.stderr).toMatch(/^error: Refusing schema prefix name/)
    const range = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '9-3',
      '--epoch',
      epoch,
    )
    expect(range.code).toBe(1)
    expect(range.stderr).toMatch(/ends before it starts/)
    const noEpoch = await run('sql', 'mysql', '--logical-shards', '8192', '--shards', '1')
    expect(noEpoch.code).toBe(1)
    expect(noEpoch.stderr).toMatch(/--epoch/)
    const outside = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '8190-8200',
      '--epoch',
      epoch,
    )
    expect(outside.code).toBe(1)
    expect(outside.stderr).toMatch(/Shard 8200, outside the 8192 logical shards/)
    const dialect = await run(
      'sql',
      'mysql',
      '--logical-shards',
      '8192',
      '--shards',
      '1',
      '--epoch',
      epoch,
      '--dialect',
      'oracle',
    )
    expect(dialect.code).toBe(1)
  })

  it('installs with progress, idempotently, and refuses another layout (exit 1)', async () => {
    const args = [
      'install',
      'mysql',
      '--logical-shards',
      '8192',
      '--url',
      URL_,
      '--shards',
      '0-24',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    ]
    const first = await run(...args)
    expect(first.code).toBe(0)
    expect(first.stdout).toMatch(
      /installed 25 shard\(s\) .* with logicalShards 8192 for mariadb .* 25 new, 0 updated/,
    )
    expect(first.stderr).toMatch(/\[#+\] 25\/25 shards/)
    const again = await run(...args)
    expect(again.code).toBe(0)
    expect(again.stdout).toMatch(/0 new, 25 updated/)
    const [rows] = await pool.query(`SELECT \`${PREFIX}24\`.next_id() AS id`)
    const layout = defineLayout({ epoch, timeBits: 41, shardBits: 13, sequenceBits: 10 })
    expect(layout.shardOf((rows as { id: string }[])[0]!.id)).toBe(24)
    const conflict = await run(
      'install',
      'mysql',
      '--logical-shards',
      '8192',
      '--url',
      URL_,
      '--shards',
      '0-1',
      '--epoch',
      '2025-01-01T00:00:00Z',
      '--schema-prefix',
      PREFIX,
    )
    expect(conflict.code).toBe(1)
    expect(conflict.stderr).toMatch(
      /^error: database .*_s_0 uses layout .* but this application uses/,
    )
    const unreachable = await run(
      'install',
      'mysql',
      '--logical-shards',
      '8192',
      '--url',
      'mysql://root@127.0.0.1:1/x',
      '--shards',
      '0',
      '--epoch',
      epoch,
    )
    expect(unreachable.code).toBe(1)
    const otherCount = await run(
      'install',
      'mysql',
      '--logical-shards',
      '4096',
      '--url',
      URL_,
      '--shards',
      '0-1',
      '--epoch',
      epoch,
      '--schema-prefix',
      PREFIX,
    )
    expect(otherCount.code).toBe(1)
    expect(otherCount.stderr).toMatch(
      /logicalShards 8192, but this application uses .*logicalShards 4096/,
    )
    const noCount = await run('install', 'mysql', '--url', URL_, '--shards', '0', '--epoch', epoch)
    expect(noCount.code).toBe(1)
    expect(noCount.stderr).toMatch(/--logical-shards/)
    const saved = process.env.MYSQL_URL
    delete process.env.MYSQL_URL
    try {
      const noUrl = await run(
        'install',
        'mysql',
        '--logical-shards',
        '8192',
        '--shards',
        '0',
        '--epoch',
        epoch,
      )
      expect(noUrl.code).toBe(1)
      expect(noUrl.stderr).toMatch(/--url or MYSQL_URL/)
    } finally {
      if (saved !== undefined) process.env.MYSQL_URL = saved
    }
    expect(unreachable.stderr).toMatch(
      /^error: The installation: the server refused the connection/,
    )
  })

  it('a database that does not exist, a URL that does not parse, a port that never answers: one typed line each', async () => {
    const sharding = ['--logical-shards', '64', '--shards', '0', '--epoch', epoch]
    const url = new URL(URL_)
    url.pathname = `/${PREFIX}missing`
    const missing = await run('install', 'mysql', '--url', url.toString(), ...sharding)
    expect(missing.code).toBe(1)
    expect(missing.stderr).toBe(
      `error: Could not connect for the installation: the database the connection names does not exist on that server (Unknown database '${PREFIX}missing'). Fix the database in the URL or pool options, or leave it out (mysql://user@host:3306/): every logical shard has a database of its own. [CONFIGURATION]`,
    )
    const garbage = await run('install', 'mysql', '--url', 'garbage', ...sharding)
    expect(garbage.code).toBe(1)
    expect(garbage.stderr).toMatch(/^error: createMysqlPool needs a connection URL like mysql:\/\//)
    const silent = createServer((socket) => socket.on('error', () => undefined))
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve))
    const { port } = silent.address() as AddressInfo
    try {
      const hung = await run(
        'install',
        'mysql',
        '--url',
        `mysql://root@127.0.0.1:${port}/`,
        ...sharding,
        '--connect-timeout-ms',
        '300',
      )
      expect(hung.code).toBe(1)
      expect(hung.stderr).toMatch(/^error: The installation: connecting to the server timed out/)
    } finally {
      silent.close()
    }
  })
})
