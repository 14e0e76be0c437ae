import {
  defineSharding,
  InvalidArgumentError,
  readShardList,
  type Sharding,
  serverCall,
} from '@shardflake/core'
import type { Command } from 'commander'
import type { CliIo } from './cli-io'
import { addLayoutOptions, type LayoutFlags, readLayout } from './layout-options'

/** The flags {@link addShardOptions} adds (with the layout's), as commander parses them. */
export interface ShardFlags extends LayoutFlags {
  logicalShards: string
  shards: string
  schemaPrefix: string
  url?: string
  connectTimeoutMs?: string
}

/**
 * Adds what every `sql <db>` / `install <db>` command takes: the required `--logical-shards`
 * and `--shards`, the
 * `--schema-prefix` (shard n lives in `<prefix><n>`, described as `container`), the command's own
 * options (`own`, listed before the layout's in `--help`) and the layout flags.
 */
export function addShardOptions(
  command: Command,
  container: 'schema' | 'database',
  own: (command: Command) => Command = (c) => c,
): Command {
  return addLayoutOptions(
    own(
      command
        .requiredOption(
          '--logical-shards <n>',
          'how many logical shards keys are spread over (decided once; recorded in the database)',
        )
        .requiredOption(
          '--shards <list>',
          'logical shards to install here: a-b, a list like 0-99,200, or all',
        )
        .option('--schema-prefix <prefix>', `${container} of shard n is <prefix><n>`, 'shard_'),
    ),
  )
}

/**
 * The sharding and the shards of the flags. The epoch is required when it is baked into the SQL
 * (`install`, `move postgres|mysql`); a move of rows checks the layout against the directory's
 * instead, so a preset's own epoch is enough there. The layout must still be able to make IDs;
 * every shard bound is checked before the list is expanded.
 * @throws InvalidArgumentError / InvalidLayoutError / TimeExhaustedError / ShardOutOfRangeError
 * with a message for the user.
 */
export function readShardFlags(
  flags: ShardFlags,
  { epochRequired = true }: { epochRequired?: boolean } = {},
): {
  sharding: Sharding
  shards: number[]
  schemaPrefix: string
} {
  if (epochRequired && flags.epoch === undefined) {
    throw new InvalidArgumentError(
      'Give the epoch of your IDs with --epoch <ISO date> (pick it once, at launch; it is baked into the SQL).',
    )
  }
  const layout = readLayout(flags)
  layout.checkGenerating()
  const logicalShards = wholeNumberFlag('--logical-shards', flags.logicalShards)
  const sharding = defineSharding({ layout, logicalShards: logicalShards ?? Number.NaN })
  return {
    sharding,
    shards: readShardList(flags.shards, sharding),
    schemaPrefix: flags.schemaPrefix,
  }
}

/** A whole-number flag as a number (undefined when not given). @throws InvalidArgumentError */
export function wholeNumberFlag(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined
  if (!/^\d{1,15}$/.test(value)) {
    throw new InvalidArgumentError(
      `${flag} must be a whole number (at most 15 digits), got ${JSON.stringify(value)}.`,
    )
  }
  return Number(value)
}

/**
 * How long `install` and `move` wait, by default, for a server to accept the connection and
 * complete its handshake (as mysql2's own default): a host and port that accept the connection
 * but are not that database (another service, a stopped server) fail within it, typed.
 */
export const CONNECT_TIMEOUT_MS = 10_000

/** Adds `--connect-timeout-ms` (install and move). */
export function addConnectTimeout(command: Command): Command {
  return command.option(
    '--connect-timeout-ms <n>',
    'longest wait for a server to accept the connection and complete its handshake',
    String(CONNECT_TIMEOUT_MS),
  )
}

/** The `--connect-timeout-ms` flag in ms (at least 1). @throws InvalidArgumentError */
export function connectTimeoutFlag(value: string | undefined): number {
  const ms = wholeNumberFlag('--connect-timeout-ms', value) ?? CONNECT_TIMEOUT_MS
  if (ms < 1) throw new InvalidArgumentError('--connect-timeout-ms must be at least 1.')
  return ms
}

/** The `--url` flag, else the environment variable. @throws InvalidArgumentError */
export function urlFlag(flags: ShardFlags, variable: string, what: string): string {
  const url = flags.url ?? process.env[variable]
  if (!url) throw new InvalidArgumentError(`Give the ${what} with --url or ${variable}.`)
  return url
}

/**
 * Runs an install on an open connection and closes it whatever happens, turning a driver's error
 * (the server cannot be reached, refuses the login, ...) into `SourceUnavailableError` ("Could
 * not install into the <what>: ..."); shardflake's own errors pass through.
 */
export async function runInstall<C, R>(
  what: string,
  connection: C,
  install: (connection: C) => Promise<R>,
  close: (connection: C) => Promise<unknown>,
): Promise<R> {
  return runGuarded(
    `Could not install into the ${what}`,
    () => install(connection),
    () => close(connection),
  )
}

/**
 * Runs `run`, then `close` whatever happens; a driver's error becomes `SourceUnavailableError`
 * ("<failure>: <its message>"), shardflake's own errors pass through.
 */
export async function runGuarded<R>(
  failure: string,
  run: () => Promise<R>,
  close: () => Promise<unknown>,
): Promise<R> {
  try {
    return await serverCall(failure, run)
  } finally {
    await close().catch(() => undefined)
  }
}

/** A one-line progress bar on stderr (redrawn in a terminal, every 10 % otherwise). */
export function progressBar(io: CliIo) {
  const tty = process.stderr.isTTY === true
  let lastTenth = -1
  return ({ done, total, shard }: { done: number; total: number; shard: number }) => {
    const width = 30
    const filled = Math.round((done / total) * width)
    const line = `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${total} shards (shard ${shard})`
    if (tty) {
      process.stderr.write(`\r${line}${done === total ? '\n' : ''}`)
      return
    }
    const tenth = Math.floor((done / total) * 10)
    if (tenth !== lastTenth || done === total) {
      lastTenth = tenth
      io.stderr(line)
    }
  }
}
