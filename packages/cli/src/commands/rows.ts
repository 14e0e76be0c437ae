import {
  formatShardList,
  InvalidArgumentError,
  type MovedTable,
  type RowMoveProgress,
  type RowStore,
  type ShardDirectory,
} from '@shardflake/core'
import { type Command, Option } from 'commander'
import type { CliIo } from '../cli-io'
import { readShardFlags, runGuarded, type ShardFlags, wholeNumberFlag } from '../install-options'
import { addLayoutOptions } from '../layout-options'

interface RowsFlags extends ShardFlags {
  dialect: 'postgres' | 'mysql'
  directory: string
  directoryTable: string
  server: string[]
  to: string
  from?: string
  tables: string
  batchSize?: string
  deleteOldCopies?: boolean
  abort?: boolean
}

/** What one dialect opens for the move: the directory, each server's row store, what to end. */
interface Opened {
  directory: ShardDirectory
  servers: Record<string, RowStore>
  end(): Promise<unknown>
}

/**
 * `shardflake move rows`: moves logical shards to another server with their rows
 * (`moveShardHomes`), resumes a move stopped half-way (the same command again), or undoes it
 * (`--abort`). The directory and every server are given by URL.
 */
export function registerRowMoveCommand(move: Command, io: CliIo): void {
  addLayoutOptions(
    move
      .command('rows')
      .description(
        'move logical shards to another server with their rows, while the application runs on ShardHomes (run again to resume; --abort to undo)',
      )
      .addOption(
        new Option('--dialect <dialect>', 'the servers are PostgreSQL or MySQL/MariaDB')
          .choices(['postgres', 'mysql'])
          .makeOptionMandatory(),
      )
      .requiredOption('--logical-shards <n>', 'how many logical shards the application has')
      .requiredOption('--shards <list>', 'logical shards to move: a-b or a list like 0-15,20')
      .requiredOption('--directory <url>', 'connection URL of the database holding the directory')
      .option('--directory-table <name>', "the directory's table", 'shardflake_directory')
      .requiredOption(
        '--server <name=url...>',
        'every server the move touches, by the name the directory uses: a=postgres://...',
      )
      .requiredOption('--to <name>', 'the server that takes the shards')
      .option('--from <name>', 'the server they leave (read from the directory when left out)')
      .requiredOption(
        '--tables <list>',
        'sharded tables, parents first: posts,comments (table:column when the ID column is not id)',
      )
      .option('--batch-size <n>', 'rows per page read, written and compared', '1000')
      .option('--delete-old-copies', 'delete the rows from the old server once the new one serves')
      .option('--abort', 'undo a move stopped half-way: the shards serve on --from again'),
  ).action(async (flags: RowsFlags) => {
    const { sharding, shards } = readShardFlags(
      { ...flags, schemaPrefix: 'shard_' },
      // The directory records the layout and refuses another: the preset's epoch is enough.
      { epochRequired: false },
    )
    const urls = readServers(flags.server)
    const tables = readTables(flags.tables)
    const batchSize = wholeNumberFlag('--batch-size', flags.batchSize)
    if (flags.abort && flags.from === undefined) {
      throw new InvalidArgumentError('--abort needs --from, the server the shards were leaving.')
    }
    const opened = await open(flags, urls, sharding)
    const common = {
      sharding,
      directory: opened.directory,
      servers: opened.servers,
      shards,
      to: flags.to,
      tables,
      ...(batchSize === undefined ? {} : { batchSize }),
      onProgress: progressLines(io),
    }
    const core = await import('@shardflake/core')
    await runGuarded(
      'Could not move rows',
      async () => {
        if (flags.abort) {
          const deleted = await core.abortShardHomesMove({ ...common, from: flags.from! })
          io.stdout(
            `aborted the move of logical shard(s) ${formatShardList(shards)} to ${flags.to}: they serve on ${flags.from} again; ${deleted} partial cop(ies) deleted from ${flags.to}.`,
          )
          return
        }
        const result = await core.moveShardHomes({
          ...common,
          ...(flags.from === undefined ? {} : { from: flags.from }),
          deleteOldCopies: flags.deleteOldCopies === true,
        })
        const rows = result.tables
          .map(
            (table) =>
              `${table.table} ${table.rows} (${table.repaired} rewritten, ${table.removed} removed while switching)`,
          )
          .join(', ')
        io.stdout(
          `moved logical shard(s) ${formatShardList(shards)} from ${result.from ?? '?'} to ${result.to} with their rows (${result.resumedFrom === 'start' ? 'from the start' : `resumed from ${result.resumedFrom}`}): ${rows}; writes waited ${result.switchMs} ms.`,
        )
        io.stdout(
          flags.deleteOldCopies
            ? `deleted ${result.oldCopiesDeleted} old cop(ies) from ${result.from}.`
            : `the old copies stay on ${result.from ?? 'the old server'}: nothing routes to them; delete them with this command plus --from ${result.from ?? '<old server>'} --delete-old-copies.`,
        )
      },
      () => opened.end(),
    )
  })
}

function readServers(specs: readonly string[]): Record<string, string> {
  const servers: Record<string, string> = {}
  for (const spec of specs) {
    const at = spec.indexOf('=')
    const name = spec.slice(0, at)
    if (at < 1 || !URL.canParse(spec.slice(at + 1))) {
      throw new InvalidArgumentError(
        `--server takes name=url (a=postgres://user@host/db), got ${JSON.stringify(spec)}.`,
      )
    }
    if (name in servers) throw new InvalidArgumentError(`--server names ${name} twice.`)
    servers[name] = spec.slice(at + 1)
  }
  return servers
}

function readTables(list: string): MovedTable[] {
  return list
    .split(',')
    .filter((part) => part !== '')
    .map((part) => {
      const [name, idColumn, extra] = part.split(':')
      if (extra !== undefined) {
        throw new InvalidArgumentError(
          `--tables takes table or table:id_column, got ${JSON.stringify(part)}.`,
        )
      }
      return idColumn === undefined ? { name: name! } : { name: name!, idColumn }
    })
}

async function open(
  flags: RowsFlags,
  urls: Record<string, string>,
  sharding: ReturnType<typeof readShardFlags>['sharding'],
): Promise<Opened> {
  const pools: { end(): Promise<unknown> }[] = []
  const end = () => Promise.all(pools.map((pool) => pool.end().catch(() => undefined)))
  const servers: Record<string, RowStore> = {}
  const options = { sharding, table: flags.directoryTable }
  if (flags.dialect === 'postgres') {
    const { PostgresShardDirectory, postgresRowStore } = await import('@shardflake/postgres')
    const pg = (await import('pg')).default
    const pool = (url: string) => {
      const created = new pg.Pool({ connectionString: url, max: 2 })
      created.on('error', () => undefined)
      pools.push(created)
      return created
    }
    for (const [name, url] of Object.entries(urls)) servers[name] = postgresRowStore(pool(url))
    return { directory: new PostgresShardDirectory(pool(flags.directory), options), servers, end }
  }
  const { createMysqlPool, MysqlShardDirectory, mysqlRowStore } = await import('@shardflake/mysql')
  const pool = async (url: string) => {
    const created = await createMysqlPool({ uri: url, connectionLimit: 2 })
    pools.push(created)
    return created
  }
  for (const [name, url] of Object.entries(urls)) servers[name] = mysqlRowStore(await pool(url))
  return {
    directory: new MysqlShardDirectory(await pool(flags.directory), options),
    servers,
    end,
  }
}

/** One line on stderr per table and phase (and at most one per 10 pages while copying). */
function progressLines(io: CliIo) {
  let last = ''
  let pages = 0
  return ({ phase, table, rows }: RowMoveProgress) => {
    const key = `${phase} ${table ?? ''}`
    if (key === last && ++pages % 10 !== 0) return
    if (key !== last) pages = 0
    last = key
    io.stderr(`${phase}${table ? ` ${table}` : ''}${rows === undefined ? '' : `: ${rows} rows`}`)
  }
}
