import { TimedOutError } from '@shardflake/core'
import type { MovePostgresResult } from '@shardflake/postgres'
import type { Command } from 'commander'
import type pg from 'pg'
import type { CliIo } from '../cli-io'
import {
  addConnectTimeout,
  addShardOptions,
  connectTimeoutFlag,
  progressBar,
  readShardFlags,
  runInstall,
  type ShardFlags,
  urlFlag,
  wholeNumberFlag,
} from '../install-options'
import { runMove } from '../run-move'

interface PostgresFlags extends ShardFlags {
  schema: string
  cache?: string
}

interface MoveFlags extends PostgresFlags {
  from: string
  to: string
  lockTimeoutMs?: string
}

/**
 * `shardflake sql postgres` prints the SQL for a layout and a range of logical shards (for a
 * migration file); `shardflake install postgres --url ...` applies it with a progress bar;
 * `shardflake move postgres --from ... --to ...` moves logical shards between databases.
 * `@shardflake/postgres` (and `pg` for install and move) are loaded only when these commands run.
 */
export function registerPostgresCommands(
  parents: { sql: Command; install: Command; move: Command },
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
    io.stdout(postgresSql(options).script.trimEnd())
  })

  common(
    addConnectTimeout(
      parents.install
        .command('postgres')
        .description('install per-shard next_id() into a PostgreSQL database (idempotent)')
        .option('--url <url>', 'connection URL (falls back to $DATABASE_URL; required)'),
    ),
  ).action(async (flags: PostgresFlags) => {
    const options = readOptions(flags)
    const url = urlFlag(flags, 'DATABASE_URL', 'database')
    const connectTimeoutMs = connectTimeoutFlag(flags.connectTimeoutMs)
    const { installPostgres, translatePostgresError } = await import('@shardflake/postgres')
    const pg = (await import('pg')).default
    const client = new pg.Client({ connectionString: url })
    client.on('error', () => undefined) // a failure of the connection reaches the statement
    await runInstall(
      'database',
      client,
      async () => {
        await connect(client, 'the install (--url)', connectTimeoutMs, translatePostgresError)
        const result = await installPostgres(client, { ...options, onProgress: progressBar(io) })
        io.stdout(
          `installed ${result.shards.length} shard(s) of layout ${JSON.stringify(result.sharding.layout.name)} with logicalShards ${result.sharding.logicalShards} (${result.created.length} created, ${result.updated.length} updated; schemas ${options.schemaPrefix}${result.shards[0]}..${options.schemaPrefix}${result.shards.at(-1)}, metadata in ${options.schema})`,
        )
      },
      () => client.end(),
    )
  })

  common(
    addConnectTimeout(
      parents.move
        .command('postgres')
        .description(
          'move logical shards to another PostgreSQL database: fence them on the old one, continue above them on the new one (resumable)',
        )
        .requiredOption('--from <url>', 'connection URL of the database the shards live in now')
        .requiredOption('--to <url>', 'connection URL of the database that takes them over')
        .option('--lock-timeout-ms <n>', 'longest wait for the locks of each step', '5000'),
    ),
  ).action(async (flags: MoveFlags) => {
    const options = readOptions(flags)
    const connectTimeoutMs = connectTimeoutFlag(flags.connectTimeoutMs)
    const { movePostgresShards, translatePostgresError } = await import('@shardflake/postgres')
    const pg = (await import('pg')).default
    await runMove<MovePostgresResult>(io, flags.lockTimeoutMs, async () => {
      const from = new pg.Client({ connectionString: flags.from })
      const to = new pg.Client({ connectionString: flags.to })
      for (const client of [from, to]) client.on('error', () => undefined)
      return {
        place: 'database',
        connections: [from, to],
        async move(extra) {
          const translate = translatePostgresError
          await connect(from, 'the move (--from)', connectTimeoutMs, translate)
          await connect(to, 'the move (--to)', connectTimeoutMs, translate)
          return movePostgresShards({ ...options, from, to, ...extra })
        },
        where: (result, names) =>
          `schemas ${names(options.schemaPrefix)}, metadata in ${result.schema}`,
      }
    })
  })
}

/**
 * Connects `client` within `timeoutMs`: a server that accepts the connection and never completes
 * a PostgreSQL handshake (another service on that port, a stopped server) fails with
 * `TimedOutError`, its socket closed; every other failure is translated (a database that does not
 * exist is a `ConfigurationError` naming it).
 */
async function connect(
  client: pg.Client,
  what: string,
  timeoutMs: number,
  translate: typeof import('@shardflake/postgres').translatePostgresError,
): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined
  let timedOut: TimedOutError | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      timedOut = new TimedOutError(
        `Could not connect for ${what}: ${client.host}:${client.port} accepted the connection but did not complete a PostgreSQL handshake within ${timeoutMs} ms. Check that the URL names a PostgreSQL server and its port (or raise --connect-timeout-ms).`,
      )
      client.connection.stream.destroy()
      reject(timedOut)
    }, timeoutMs)
  })
  try {
    await Promise.race([client.connect(), deadline])
  } catch (error) {
    throw timedOut ?? translate(error, { what, connecting: true })
  } finally {
    clearTimeout(timer)
  }
}

function readOptions(flags: PostgresFlags) {
  const cache = wholeNumberFlag('--cache', flags.cache)
  return {
    ...readShardFlags(flags),
    schema: flags.schema,
    ...(cache === undefined ? {} : { cache }),
  }
}
