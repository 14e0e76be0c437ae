import type { Command } from 'commander'
import {
  addShardOptions,
  progressBar,
  readShardFlags,
  runInstall,
  type ShardFlags,
  urlFlag,
  wholeNumberFlag,
} from '../install-options'
import type { CliIo } from '../program'

interface PostgresFlags extends ShardFlags {
  schema: string
  cache?: string
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
    addShardOptions(command, 'schema', (c) =>
      c
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
    const url = urlFlag(flags, 'DATABASE_URL', 'database')
    const { installPostgres } = await import('@shardflake/postgres')
    const pg = (await import('pg')).default
    const client = new pg.Client({ connectionString: url })
    await runInstall(
      'database',
      client,
      async () => {
        await client.connect()
        const result = await installPostgres(client, { ...options, onProgress: progressBar(io) })
        io.stdout(
          `installed ${result.shards.length} shard(s) of layout ${JSON.stringify(result.layout.name)} (schemas ${options.schemaPrefix}${result.shards[0]}..${options.schemaPrefix}${result.shards.at(-1)}, metadata in ${result.schema})`,
        )
      },
      () => client.end(),
    )
  })
}

function readOptions(flags: PostgresFlags) {
  const { layout, shards } = readShardFlags(flags)
  const cache = wholeNumberFlag('--cache', flags.cache)
  return {
    layout,
    shards,
    schemaPrefix: flags.schemaPrefix,
    schema: flags.schema,
    ...(cache === undefined ? {} : { cache }),
  }
}
