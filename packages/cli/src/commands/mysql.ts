import { type Command, Option } from 'commander'
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

interface MysqlFlags extends ShardFlags {
  dialect?: 'mariadb' | 'mysql8'
  maxDriftMs?: string
}

/**
 * `shardflake sql mysql` prints the MySQL 8 / MariaDB routines for a layout and a range of logical
 * shards (a script for the `mysql`/`mariadb` client, with `DELIMITER`);
 * `shardflake install mysql --url ...` applies them with a progress bar. `@shardflake/mysql` (and
 * `mysql2` for install) are loaded only when these commands run.
 */
export function registerMysqlCommands(
  parents: { sql: Command; install: Command },
  io: CliIo,
): void {
  const common = (command: Command, defaultDialect: string | undefined) =>
    addShardOptions(command, 'database', (c) =>
      c
        .addOption(
          new Option(
            '--dialect <dialect>',
            defaultDialect ? 'server dialect' : 'server dialect (default: ask the server)',
          )
            .choices(['mariadb', 'mysql8'])
            .default(defaultDialect),
        )
        .option('--max-drift-ms <n>', 'how far the counter may run ahead of the clock', '1000'),
    )

  common(
    parents.sql
      .command('mysql')
      .description(
        'print the MySQL/MariaDB SQL: per-shard databases with next_id() and next_ids(n)',
      ),
    'mariadb',
  ).action(async (flags: MysqlFlags) => {
    const options = readOptions(flags)
    const { generateMysqlSql } = await import('@shardflake/mysql')
    io.stdout(generateMysqlSql({ ...options, dialect: flags.dialect ?? 'mariadb' }).trimEnd())
  })

  common(
    parents.install
      .command('mysql')
      .description('install per-shard next_id() into a MySQL 8 / MariaDB server (idempotent)')
      .option('--url <url>', 'connection URL (default: $MYSQL_URL)'),
    undefined,
  ).action(async (flags: MysqlFlags) => {
    const options = readOptions(flags)
    const url = urlFlag(flags, 'MYSQL_URL', 'server')
    const { createMysqlPool, installMysqlShards } = await import('@shardflake/mysql')
    const pool = await createMysqlPool({ uri: url, connectionLimit: 1 })
    await runInstall(
      'server',
      pool,
      async () => {
        const result = await installMysqlShards(pool, {
          ...options,
          dialect: flags.dialect ?? 'auto',
          onProgress: progressBar(io),
        })
        const shards = [...result.created, ...result.updated].sort((a, b) => a - b)
        io.stdout(
          `installed ${shards.length} shard(s) of layout ${JSON.stringify(options.layout.name)} for ${result.dialect} (databases ${options.schemaPrefix}${shards[0]}..${options.schemaPrefix}${shards.at(-1)}; ${result.created.length} new, ${result.updated.length} updated, counters kept)`,
        )
      },
      () => pool.end(),
    )
  })
}

function readOptions(flags: MysqlFlags) {
  const { layout, shards } = readShardFlags(flags)
  const maxDriftMs = wholeNumberFlag('--max-drift-ms', flags.maxDriftMs)
  return {
    layout,
    shards,
    schemaPrefix: flags.schemaPrefix,
    ...(maxDriftMs === undefined ? {} : { maxDriftMs }),
  }
}
