import {
  InvalidArgumentError,
  parseShardList,
  ShardflakeError,
  SourceUnavailableError,
} from '@shardflake/core'
import { type Command, Option } from 'commander'
import { addLayoutOptions, type LayoutFlags, readLayout } from '../layout-options'
import type { CliIo } from '../program'

interface MysqlFlags extends LayoutFlags {
  shards: string
  schemaPrefix: string
  dialect?: 'mariadb' | 'mysql8'
  maxDriftMs?: string
  url?: string
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
    addLayoutOptions(
      command
        .requiredOption('--shards <list>', 'logical shards: a-b, or a list like 0-99,200')
        .option('--schema-prefix <prefix>', 'database of shard n is <prefix><n>', 'shard_')
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
    const url = flags.url ?? process.env.MYSQL_URL
    if (!url) throw new InvalidArgumentError('Give the server with --url or MYSQL_URL.')
    const { createMysqlPool, installMysqlShards } = await import('@shardflake/mysql')
    const pool = await createMysqlPool({ uri: url, connectionLimit: 1 })
    try {
      const result = await installMysqlShards(pool, {
        ...options,
        dialect: flags.dialect ?? 'auto',
        onProgress: progressBar(io),
      })
      const shards = [...result.created, ...result.updated].sort((a, b) => a - b)
      io.stdout(
        `installed ${shards.length} shard(s) of layout ${JSON.stringify(options.layout.name)} for ${result.dialect} (databases ${options.schemaPrefix}${shards[0]}..${options.schemaPrefix}${shards.at(-1)}; ${result.created.length} new, ${result.updated.length} updated, counters kept)`,
      )
    } catch (error) {
      if (error instanceof ShardflakeError) throw error
      throw new SourceUnavailableError(
        `Could not install into the server: ${error instanceof Error ? error.message : String(error)}`,
        { cause: error },
      )
    } finally {
      await pool.end().catch(() => undefined)
    }
  })
}

function readOptions(flags: MysqlFlags) {
  if (flags.epoch === undefined) {
    throw new InvalidArgumentError(
      'Give the epoch of your IDs with --epoch <ISO date> (pick it once, at launch; it is baked into the SQL).',
    )
  }
  const layout = readLayout(flags)
  const shards = parseShardList(flags.shards)
  for (const shard of shards) layout.checkShard(shard)
  if (flags.maxDriftMs !== undefined && !/^\d+$/.test(flags.maxDriftMs)) {
    throw new InvalidArgumentError(
      `--max-drift-ms must be a whole number, got ${JSON.stringify(flags.maxDriftMs)}.`,
    )
  }
  return {
    layout,
    shards,
    schemaPrefix: flags.schemaPrefix,
    ...(flags.maxDriftMs === undefined ? {} : { maxDriftMs: Number(flags.maxDriftMs) }),
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
