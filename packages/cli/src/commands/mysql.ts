import type { MoveMysqlResult } from '@shardflake/mysql'
import { type Command, Option } from 'commander'
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

interface MysqlFlags extends ShardFlags {
  dialect?: 'mariadb' | 'mysql8'
  maxDriftMs?: string
}

interface MoveFlags extends MysqlFlags {
  from: string
  to: string
  lockTimeoutMs?: string
}

/**
 * `shardflake sql mysql` prints the MySQL 8 / MariaDB routines for a layout and a range of logical
 * shards (a script for the `mysql`/`mariadb` client, with `DELIMITER`);
 * `shardflake install mysql --url ...` applies them with a progress bar;
 * `shardflake move mysql --from ... --to ...` moves logical shards between servers.
 * `@shardflake/mysql` (and `mysql2` for install and move) are loaded only when these commands run.
 */
export function registerMysqlCommands(
  parents: { sql: Command; install: Command; move: Command },
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
    const { mysqlSql } = await import('@shardflake/mysql')
    io.stdout(mysqlSql({ ...options, dialect: flags.dialect ?? 'mariadb' }).script.trimEnd())
  })

  common(
    addConnectTimeout(
      parents.install
        .command('mysql')
        .description('install per-shard next_id() into a MySQL 8 / MariaDB server (idempotent)')
        .option(
          '--url <url>',
          'connection URL, mysql://user:password@host:3306/database (default: the MYSQL_URL environment variable; --url or MYSQL_URL is required)',
        ),
    ),
    undefined,
  ).action(async (flags: MysqlFlags) => {
    const options = readOptions(flags)
    const url = urlFlag(flags, 'MYSQL_URL', 'server')
    const connectTimeout = connectTimeoutFlag(flags.connectTimeoutMs)
    const { createMysqlPool, installMysql } = await import('@shardflake/mysql')
    const pool = await createMysqlPool({ uri: url, connectionLimit: 1, connectTimeout })
    await runInstall(
      'server',
      pool,
      async () => {
        const result = await installMysql(pool, {
          ...options,
          dialect: flags.dialect ?? 'auto',
          onProgress: progressBar(io),
        })
        const { shards } = result
        io.stdout(
          `installed ${shards.length} shard(s) of layout ${JSON.stringify(result.sharding.layout.name)} with logicalShards ${result.sharding.logicalShards} for ${result.flavor} (databases ${options.schemaPrefix}${shards[0]}..${options.schemaPrefix}${shards.at(-1)}; ${result.created.length} new, ${result.updated.length} updated, counters kept)`,
        )
      },
      () => pool.end(),
    )
  })

  common(
    addConnectTimeout(
      parents.move
        .command('mysql')
        .description(
          'move logical shards to another MySQL/MariaDB server: fence them on the old one, continue above them on the new one (resumable)',
        )
        .requiredOption('--from <url>', 'connection URL of the server the shards live on now')
        .requiredOption('--to <url>', 'connection URL of the server that takes them over')
        .option('--lock-timeout-ms <n>', 'longest wait for the locks of each step', '5000'),
    ),
    undefined,
  ).action(async (flags: MoveFlags) => {
    const options = readOptions(flags)
    const connectTimeout = connectTimeoutFlag(flags.connectTimeoutMs)
    const { createMysqlPool, moveMysqlShards } = await import('@shardflake/mysql')
    await runMove<MoveMysqlResult>(io, flags.lockTimeoutMs, async () => {
      const from = await createMysqlPool({ uri: flags.from, connectionLimit: 1, connectTimeout })
      const to = await createMysqlPool({ uri: flags.to, connectionLimit: 1, connectTimeout })
      return {
        place: 'server',
        connections: [from, to],
        move: (extra) =>
          moveMysqlShards({ ...options, from, to, dialect: flags.dialect ?? 'auto', ...extra }),
        where: (result, names) => `databases ${names(result.schemaPrefix)}`,
      }
    })
  })
}

function readOptions(flags: MysqlFlags) {
  const maxDriftMs = wholeNumberFlag('--max-drift-ms', flags.maxDriftMs)
  return { ...readShardFlags(flags), ...(maxDriftMs === undefined ? {} : { maxDriftMs }) }
}
