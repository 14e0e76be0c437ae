import {
  InvalidArgumentError,
  parseShardList,
  ShardflakeError,
  SourceUnavailableError,
} from '@shardflake/core'
import type { Command } from 'commander'
import { addLayoutOptions, type LayoutFlags, readLayout } from '../layout-options'
import type { CliIo } from '../program'

interface PostgresFlags extends LayoutFlags {
  shards: string
  schemaPrefix: string
  schema: string
  cache?: string
  url?: string
}

/**
 * `shardflake sql postgres` prints the SQL for a layout and a range of logical shards (for a
 * migration file); `shardflake install postgres --url ...` applies it with a progress bar.
 * `@shardflake/postgres` (and `pg` for install) are loaded only when these commands run.
 */
export function registerPostgresCommands(
  parents: { sql: Command; install: Command },
  io: CliIo,
): void {
  const common = (command: Command) =>
    addLayoutOptions(
      command
        .requiredOption('--shards <list>', 'logical shards: a-b, or a list like 0-99,200')
        .option('--schema-prefix <prefix>', 'schema of shard n is <prefix><n>', 'shard_')
        .option('--schema <name>', 'schema for the metadata and decode helpers', 'shardflake')
        .option('--cache <n>', 'CACHE of each shard sequence (1 keeps IDs in time order)'),
    )

  common(
    parents.sql
      .command('postgres')
      .description('print the PostgreSQL SQL: per-shard schemas with next_id() and next_ids(n)'),
  ).action(async (flags: PostgresFlags) => {
    const options = readOptions(flags)
    const { postgresSql } = await import('@shardflake/postgres')
    io.stdout(postgresSql(options))
  })

  common(
    parents.install
      .command('postgres')
      .description('install per-shard next_id() into a PostgreSQL database (idempotent)')
      .option('--url <url>', 'connection URL (default: $DATABASE_URL)'),
  ).action(async (flags: PostgresFlags) => {
    const options = readOptions(flags)
    const url = flags.url ?? process.env.DATABASE_URL
    if (!url) throw new InvalidArgumentError('Give the database with --url or DATABASE_URL.')
    const { installPostgres } = await import('@shardflake/postgres')
    const pg = (await import('pg')).default
    const client = new pg.Client({ connectionString: url })
    const progress = progressBar(io)
    try {
      await client.connect()
      const result = await installPostgres(client, { ...options, onProgress: progress })
      io.stdout(
        `installed ${result.shards.length} shard(s) of layout ${JSON.stringify(result.layout.name)} (schemas ${options.schemaPrefix}${result.shards[0]}..${options.schemaPrefix}${result.shards.at(-1)}, metadata in ${result.schema})`,
      )
    } catch (error) {
      if (error instanceof ShardflakeError) throw error
      throw new SourceUnavailableError(
        `Could not install into the database: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      )
    } finally {
      await client.end().catch(() => undefined)
    }
  })
}

function readOptions(flags: PostgresFlags) {
  if (flags.epoch === undefined) {
    throw new InvalidArgumentError(
      'Give the epoch of your IDs with --epoch <ISO date> (pick it once, at launch; it is baked into the SQL).',
    )
  }
  const layout = readLayout(flags)
  const shards = parseShardList(flags.shards)
  for (const shard of shards) layout.checkShard(shard)
  if (flags.cache !== undefined && !/^\d+$/.test(flags.cache)) {
    throw new InvalidArgumentError(
      `--cache must be a whole number, got ${JSON.stringify(flags.cache)}.`,
    )
  }
  return {
    layout,
    shards,
    schemaPrefix: flags.schemaPrefix,
    schema: flags.schema,
    ...(flags.cache === undefined ? {} : { cache: Number(flags.cache) }),
  }
}

/** A one-line progress bar on stderr (redrawn in a terminal, every 10 % otherwise). */
function progressBar(io: CliIo) {
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
