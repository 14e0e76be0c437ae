/**
 * Whatever arguments the CLI gets, it exits 0, or prints one line `error: <message> [<CODE>]` (or
 * commander's usage line) and exits non-zero: never a stack trace, never a hang. Seeded.
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { watchUnhandled } from '../../conformance/src/fuzz'
import { type CliIo, runCli } from '../src'

async function run(...argv: string[]) {
  const out: string[] = []
  const err: string[] = []
  const io: CliIo = { stdout: (text) => out.push(text), stderr: (text) => err.push(text) }
  const code = await runCli(argv, io)
  return { code, stdout: out.join('\n'), stderr: err.join('\n') }
}

/** A failure as users see it: one line with a code, no stack frames. */
function expectOneLineFailure(result: { code: number; stderr: string }, input: unknown) {
  expect(result.code, fc.stringify(input)).not.toBe(0)
  expect(result.stderr.split('\n'), fc.stringify(input)).toHaveLength(1)
  expect(result.stderr, fc.stringify(input)).toMatch(/^error: /)
  expect(result.stderr, fc.stringify(input)).not.toMatch(/\n\s+at /)
}

describe('the CLI refuses bad input in one line', () => {
  it('layouts whose times no Date can hold, and garbage epochs', async () => {
    for (const argv of [
      ['layout', '--time-unit-ms', '1000000000000'],
      ['layout', '--epoch', '0', '--time-bits', '60', '--shard-bits', '2', '--sequence-bits', '2'],
      [
        'decode',
        '5',
        '--epoch',
        '0',
        '--time-bits',
        '60',
        '--shard-bits',
        '2',
        '--sequence-bits',
        '2',
      ],
      ['layout', '--epoch', 'x 1'],
      ['layout', '--epoch', 'hello 2020'],
      ['compose', '--timestamp', 'x 1', '--shard', '1'],
    ]) {
      const result = await run(...argv)
      expectOneLineFailure(result, argv)
      expect(result.stderr, argv.join(' ')).toMatch(/\[(INVALID_LAYOUT|INVALID_ARGUMENT)\]$/)
    }
    expect((await run('layout', '--epoch', 'x 1')).stderr).toMatch(
      /epoch "x 1" is not a valid instant/,
    )
    expect((await run('layout', '--epoch', '2020-01-01', '--json')).code).toBe(0)
  })

  it('sql postgres --shards all on a 31-shard-bit layout: refused by size, at once', async () => {
    const result = await run(
      'sql',
      'postgres',
      '--epoch',
      '2026-01-01',
      '--time-bits',
      '22',
      '--time-unit-ms',
      '1000000',
      '--shard-bits',
      '31',
      '--sequence-bits',
      '10',
      '--logical-shards',
      '2147483648',
      '--shards',
      'all',
    )
    expectOneLineFailure(result, 'sql postgres --shards all')
    expect(result.stderr).toMatch(/at most 1048576 can be listed at once.*\[INVALID_ARGUMENT\]$/)
  })

  it('install mysql --url garbage: one line with the code', async () => {
    const result = await run(
      'install',
      'mysql',
      '--url',
      'garbage',
      '--epoch',
      '2025-01-01',
      '--logical-shards',
      '4',
      '--shards',
      'all',
    )
    expectOneLineFailure(result, 'install mysql --url garbage')
    expect(result.stderr).toMatch(/mysql:\/\/.*\[[A-Z_]+\]$/)
  })

  it('the installed command prints no stack trace', async () => {
    const bin = fileURLToPath(new URL('../bin/shardflake.mjs', import.meta.url))
    const failed = await promisify(execFile)(
      process.execPath,
      [bin, 'layout', '--time-bits', '60', '--epoch', '0'],
      {
        timeout: 30_000,
      },
    ).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    )
    expect(failed?.code).toBe(1)
    expect(failed?.stderr.trim().split('\n')).toHaveLength(1)
    expect(failed?.stderr).toMatch(/^error: .*\[INVALID_LAYOUT\]/)
  })

  it('any arguments: exit 0, or one line and a non-zero exit', async () => {
    const unhandled = watchUnhandled()
    const flag = fc.constantFrom(
      '--epoch',
      '--time-bits',
      '--shard-bits',
      '--sequence-bits',
      '--worker-bits',
      '--time-unit-ms',
      '--layout',
      '--timestamp',
      '--shard',
      '--sequence',
      '--worker',
      '--json',
      '--logical-shards',
      '--shards',
    )
    const value = fc.oneof(
      fc.constantFrom('0', '1', '31', '41', '60', '64', '1000000000000', '-1', '1.5', 'x 1', 'all'),
      fc.constantFrom(
        '2020-01-01',
        '2099-01-01',
        '2020-02-30',
        'instagram',
        'discord',
        'sonyflake',
      ),
      fc.integer({ min: 0, max: 70 }).map(String),
      fc.bigInt({ min: -(1n << 64n), max: 1n << 65n }).map(String),
      fc.string({ maxLength: 12 }),
    )
    const argv = fc
      .tuple(
        fc.constantFrom('decode', 'compose', 'layout', 'sql postgres', 'sql mysql'),
        fc.array(fc.oneof(fc.tuple(flag, value), fc.tuple(value)), { maxLength: 6 }),
      )
      .map(([command, rest]) => [...command.split(' '), ...rest.flat()])
    await fc.assert(
      fc.asyncProperty(argv, async (args) => {
        const result = await run(...args)
        if (result.code === 0) return
        expectOneLineFailure(result, args)
      }),
      { seed: 0x5eed, numRuns: 150 },
    )
    await unhandled.check()
  })
})
