import { instagram } from '@shardflake/core'
import { describe, expect, it } from 'vitest'
import { type CliIo, runCli } from '../src'

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

describe('shardflake CLI', () => {
  const id = instagram.compose({
    timestamp: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
    shard: 1341,
    sequence: 905,
  })

  it('decodes IDs, as text and as JSON only', async () => {
    const text = await run('decode', id.toString())
    expect(text.code).toBe(0)
    expect(text.stdout).toMatch(/timestamp\s+2026-01-02T03:04:05\.678Z/)
    expect(text.stdout).toMatch(/shard\s+1341/)
    const json = await run('decode', id.toString(), '--json')
    expect(JSON.parse(json.stdout)).toEqual({
      id: id.toString(),
      timestamp: '2026-01-02T03:04:05.678Z',
      timestampMs: Date.UTC(2026, 0, 2, 3, 4, 5, 678),
      shard: 1341,
      worker: 0,
      sequence: 905,
    })
    const many = await run('decode', id.toString(), (id + 1n).toString(), '--json')
    expect(JSON.parse(many.stdout)).toHaveLength(2)
  })

  it('decodes with another preset or epoch', async () => {
    const discord = await run('decode', '175928847299117063', '--layout', 'discord', '--json')
    expect(JSON.parse(discord.stdout)).toMatchObject({
      timestamp: '2016-04-30T11:18:25.796Z',
      shard: 1,
      sequence: 7,
    })
    const epoch = await run(
      'decode',
      '11637205501278089',
      '--epoch',
      '2011-01-01T00:00:00Z',
      '--json',
    )
    expect(JSON.parse(epoch.stdout)).toMatchObject({
      shard: 1341,
      sequence: 905,
      timestampMs: Date.UTC(2011, 0, 1) + 1387263000,
    })
  })

  it('composes an ID', async () => {
    const result = await run(
      'compose',
      '--timestamp',
      '2026-01-02T03:04:05.678Z',
      '--shard',
      '1341',
      '--sequence',
      '905',
    )
    expect(result).toMatchObject({ code: 0, stdout: id.toString() })
  })

  it('prints a layout', async () => {
    const result = await run('layout', '--epoch', '2025-01-01T00:00:00Z', '--json')
    expect(JSON.parse(result.stdout)).toMatchObject({
      capacityPerMs: 1024,
      negativeFrom: '2059-11-04T19:53:47.776Z',
      timeEndsAt: '2094-09-07T15:47:35.552Z',
    })
    expect((await run('layout')).stdout).toMatch(/1024 IDs per ms per shard/)
  })

  it('exits 1 with a clear message on bad input', async () => {
    expect(await run('decode', 'abc')).toMatchObject({
      code: 1,
      stderr: 'error: ID "abc" is not a decimal integer. [INVALID_ID]',
    })
    const bits = await run('layout', '--time-bits', '50')
    expect(bits.code).toBe(1)
    expect(bits.stderr).toMatch(/add up to 73 bits/)
    expect((await run('compose', '--timestamp', 'yesterday', '--shard', '1')).stderr).toMatch(
      /Not a time/,
    )
    expect((await run('decode', '1', '--layout', 'nope')).code).not.toBe(0)
  })

  it('shows the options of a nested command through `help`', async () => {
    const help = await run('help', 'install', 'postgres')
    expect(help.code).toBe(0)
    expect(help.stdout).toMatch(/--logical-shards <n>/)
    expect(help.stdout).toMatch(/--shards <list>/)
    expect(help.stdout).toEqual((await run('install', 'postgres', '--help')).stdout)
  })

  it('checks shard flags before expanding them, and refuses an exhausted layout', async () => {
    const flags = ['--epoch', '2025-01-01T00:00:00Z', '--logical-shards', '64']
    const huge = await run('sql', 'postgres', ...flags, '--shards', '0-99999999999')
    expect(huge.code).toBe(1)
    expect(huge.stderr).toMatch(/outside the 64 logical shards/)
    const missing = await run('sql', 'postgres', '--epoch', '2025-01-01T00:00:00Z', '--shards', '0')
    expect(missing.code).not.toBe(0)
    const tooMany = await run(
      'sql',
      'postgres',
      '--epoch',
      '2025-01-01T00:00:00Z',
      '--logical-shards',
      '9000',
      '--shards',
      '0',
    )
    expect(tooMany.stderr).toMatch(/logicalShards must be an integer from 1 to 8192/)
    const exhausted = await run(
      'install',
      'postgres',
      '--epoch',
      '0',
      '--time-bits',
      '30',
      '--shard-bits',
      '13',
      '--sequence-bits',
      '10',
      '--logical-shards',
      '64',
      '--shards',
      '0',
      '--url',
      'postgres://127.0.0.1:1/none',
    )
    expect(exhausted.code).toBe(1)
    expect(exhausted.stderr).toMatch(/can no longer make IDs/)
  })
})
