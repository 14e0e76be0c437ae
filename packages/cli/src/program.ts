import {
  type DecodedId,
  InvalidArgumentError,
  type Layout,
  parseInstant,
  ShardflakeError,
} from '@shardflake/core'
import { Command, CommanderError } from 'commander'
import { type CliIo, processIo } from './cli-io'
import { registerLeasesCommand } from './commands/leases'
import { registerMysqlCommands } from './commands/mysql'
import { registerPostgresCommands } from './commands/postgres'
import { registerRowMoveCommand } from './commands/rows'
import { addLayoutOptions, type LayoutFlags, readLayout } from './layout-options'

/**
 * The `shardflake` program. `decode`, `compose` and `layout` work on IDs and layouts; `sql` and
 * `install` print or apply the SQL of a database package; `move` moves logical shards between
 * databases.
 */
export function createProgram(io: CliIo = processIo): Command {
  const program = new Command('shardflake')
    .description('64-bit, time-ordered, shard-aware IDs')
    .configureOutput({
      writeOut: (text) => io.stdout(text.trimEnd()),
      writeErr: (text) => io.stderr(text.trimEnd()),
    })
    .exitOverride()

  addLayoutOptions(
    program
      .command('decode')
      .description('take IDs apart: time, shard, worker, sequence')
      .argument('<id...>', 'IDs (decimal; negative spelling accepted)')
      .option('--json', 'print JSON only'),
  ).action((ids: string[], flags: LayoutFlags & { json?: boolean }) => {
    const layout = readLayout(flags)
    const decoded = ids.map((id) => describeId(layout.decompose(id)))
    if (flags.json) io.stdout(JSON.stringify(decoded.length === 1 ? decoded[0] : decoded, null, 2))
    else for (const row of decoded) io.stdout(formatRecord(row))
  })

  addLayoutOptions(
    program
      .command('compose')
      .description('put an ID together from its parts')
      .requiredOption('--timestamp <ms|ISO>', 'time of the ID')
      .requiredOption('--shard <n>', 'logical shard')
      .option('--sequence <n>', 'sequence within the tick', '0')
      .option('--worker <n>', 'worker id', '0')
      .option('--json', 'print JSON only'),
  ).action(
    (
      flags: LayoutFlags & {
        timestamp: string
        shard: string
        sequence: string
        worker: string
        json?: boolean
      },
    ) => {
      const layout = readLayout(flags)
      const id = layout.compose({
        timestamp: parseTime(flags.timestamp),
        shard: whole('--shard', flags.shard),
        sequence: whole('--sequence', flags.sequence),
        worker: whole('--worker', flags.worker),
      })
      io.stdout(flags.json ? JSON.stringify({ id: id.toString() }) : id.toString())
    },
  )

  addLayoutOptions(
    program
      .command('layout')
      .description("print a layout's widths, capacity and end dates")
      .option('--json', 'print JSON only'),
  ).action((flags: LayoutFlags & { json?: boolean }) => {
    const layout = readLayout(flags)
    io.stdout(
      flags.json ? JSON.stringify(layout.toJSON(), null, 2) : formatRecord(describeLayout(layout)),
    )
  })

  const sql = program.command('sql').description('print the SQL that installs the ID functions')
  const install = program.command('install').description('install the ID functions into a database')
  const move = program
    .command('move')
    .description('move logical shards to another database without repeating an ID')
  // database commands
  registerPostgresCommands({ sql, install, move }, io)
  registerMysqlCommands({ sql, install, move }, io)
  registerRowMoveCommand(move, io)
  registerLeasesCommand(program, io)
  void sql
  void install

  return program
}

/**
 * Runs the CLI with `argv` (without `node` and the script). Returns the exit code: 0, or non-zero
 * after printing one line, `error: <message> [<CODE>]`, never a stack trace. A usage error prints
 * commander's own line.
 */
export async function runCli(argv: readonly string[], io: CliIo = processIo): Promise<number> {
  const program = createProgram(io)
  // `help install postgres` shows the options of `install postgres`, as `install postgres --help` does.
  const args = argv[0] === 'help' && argv.length > 2 ? [...argv.slice(1), '--help'] : [...argv]
  try {
    await program.parseAsync(args, { from: 'user' })
    return 0
  } catch (error) {
    if (error instanceof CommanderError) {
      return error.exitCode
    }
    io.stderr(errorLine(error))
    return 1
  }
}

/** One line for any failure: its message and its code (a ShardflakeError's, or the error's own). */
export function errorLine(error: unknown): string {
  const oneLine = (text: string) => text.replace(/\s*\n\s*/g, ' ').trim()
  if (error instanceof ShardflakeError) return `error: ${oneLine(error.message)} [${error.code}]`
  const own = error as { code?: unknown; name?: unknown; message?: unknown } | null | undefined
  const code =
    typeof own?.code === 'string' && own.code !== ''
      ? own.code
      : typeof own?.name === 'string' && own.name !== ''
        ? own.name
        : 'UNEXPECTED'
  const message =
    typeof own?.message === 'string' && own.message !== '' ? own.message : String(error)
  return `error: ${oneLine(message)} [${code}]`
}

function describeId(decoded: DecodedId) {
  return {
    id: decoded.id.toString(),
    timestamp: decoded.timestamp.toISOString(),
    timestampMs: decoded.timestampMs,
    shard: decoded.shard,
    worker: decoded.worker,
    sequence: decoded.sequence,
  }
}

function describeLayout(layout: Layout) {
  const json = layout.toJSON()
  return {
    layout: json.name,
    epoch: json.epochIso,
    fields: json.order
      .filter((field) => layout[`${field}Bits` as const] > 0)
      .map((field) => `${field} ${layout[`${field}Bits` as const]}`)
      .join(' | '),
    timeUnitMs: json.timeUnitMs,
    capacity: `${json.capacityPerMs} IDs per ms per shard (${json.capacityPerMs * 1000} per second)`,
    shards: layout.shardCount,
    timeEndsAt: json.timeEndsAt,
    negativeFrom: json.negativeFrom ?? 'never (bit 63 unused)',
  }
}

function formatRecord(record: Record<string, string | number>): string {
  const width = Math.max(...Object.keys(record).map((key) => key.length))
  return Object.entries(record)
    .map(([key, value]) => `${key.padEnd(width)}  ${value}`)
    .join('\n')
}

function parseTime(text: string): number {
  const ms = /^\d{1,16}$/.test(text) ? Number(text) : parseInstant(text)
  if (ms === undefined || !Number.isFinite(ms)) {
    throw new InvalidArgumentError(
      `Not a time: ${JSON.stringify(text)}. Give --timestamp as ms since 1970 or an ISO-8601 date or date-time (like 2025-01-01T00:00:00Z).`,
    )
  }
  return ms
}

function whole(flag: string, text: string): number {
  if (!/^\d+$/.test(text))
    throw new InvalidArgumentError(`${flag} must be a whole number, got ${JSON.stringify(text)}.`)
  return Number(text)
}
