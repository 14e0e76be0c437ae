/**
 * `node --experimental-transform-types --import ./src/hooks.ts src/move-demo.ts [--dialect=postgres|mariadb] [--orm=typeorm] [--json]`
 *
 * Moves logical shards 0-15 from server a to server c while the application writes and reads.
 * The homes live in a shard directory on server a (a table every process reads, which the move
 * changes; a `ShardMap` in code cannot change). Writers add posts through one ORM without pause
 * and a reader reads posts by ID; `moveShardHomes` copies the shards' users, posts and comments
 * to c, compares them by count and checksum while writes to those shards wait, switches the
 * directory and deletes the old copies on a. A write or read that meets the switch gets a
 * retryable `ShardflakeError` (`SHARD_MOVING`, `DIRECTORY_STALE`) and tries again. Then raw SQL
 * on each server checks the new homes (0-15 on c, 16-20 on a): every acknowledged post is on its
 * home exactly once, no row is off its home, no ID repeats. Exit code 1 on any problem.
 */
import { parseArgs } from 'node:util'
import {
  InProcessSource,
  moveShardHomes,
  type RowStore,
  type ShardDirectory,
  ShardflakeError,
  type ShardHomesMoveResult,
  ShardMap,
} from '@shardflake/core'
import { createMysqlPool, MysqlShardDirectory, mysqlRowStore } from '@shardflake/mysql'
import { PostgresShardDirectory, postgresRowStore } from '@shardflake/postgres'
import pg from 'pg'
import { openBlog } from './app.ts'
import { ORMS, type OrmName, type RoutedBlog } from './blog.ts'
import {
  type ExampleDatabase,
  type ExampleDialect,
  sharding,
  shardMap,
  startExampleServers,
} from './servers.ts'

/** The shards the demo moves, and where. */
export const MOVE = { shards: { from: 0, to: 15 }, from: 'a', to: 'c' } as const

/** The homes once the move is done: 0-15 on c, 16-20 on a, 21-41 on b, 42-63 on c. */
export const movedMap = new ShardMap(sharding, [
  { from: 0, to: 15, target: 'c' },
  { from: 16, to: 20, target: 'a' },
  { from: 21, to: 41, target: 'b' },
  { from: 42, to: 63, target: 'c' },
])

/** What the demo saw, printed as JSON with `--json`. */
export interface MoveDemoReport {
  readonly dialect: ExampleDialect
  readonly orm: OrmName
  readonly move: ShardHomesMoveResult
  /** Posts acknowledged to the writers, and how many of them were on the moving shards. */
  readonly acknowledged: number
  readonly acknowledgedOnMovedShards: number
  /** Acknowledged posts not found on their new home. */
  readonly lost: number
  /** Rows of users, posts and comments on a server that is not their home after the move. */
  readonly misplaced: number
  /** IDs found more than once across the servers. */
  readonly repeated: number
  /** Reads by ID answered during the run, and retryable errors by code. */
  readonly reads: number
  readonly writeErrors: Readonly<Record<string, number>>
  readonly readErrors: Readonly<Record<string, number>>
}

/** Runs `work` again while it fails with a retryable error; counts each such error by code. */
async function retrying<T>(errors: Record<string, number>, work: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await work()
    } catch (error) {
      if (!(error instanceof ShardflakeError && error.retryable)) throw error
      errors[error.code] = (errors[error.code] ?? 0) + 1
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
}

/**
 * Moves logical shards 0-15 from server a to server c: their rows in users, posts and comments
 * (parents first) and their entries in `directory`; the old copies on a are deleted.
 */
export async function moveSixteenShards(options: {
  readonly directory: ShardDirectory
  readonly urls: Readonly<Record<string, string>>
  readonly dialect: ExampleDialect
}): Promise<ShardHomesMoveResult> {
  const ends: (() => Promise<void>)[] = []
  const servers: Record<string, RowStore> = {}
  for (const name of [MOVE.from, MOVE.to]) {
    const url = options.urls[name]!
    if (options.dialect === 'postgres') {
      const pool = new pg.Pool({ connectionString: url, max: 2 })
      servers[name] = postgresRowStore(pool)
      ends.push(() => pool.end())
    } else {
      const pool = await createMysqlPool({ uri: url, connectionLimit: 2 })
      servers[name] = mysqlRowStore(pool)
      ends.push(() => pool.end())
    }
  }
  try {
    return await moveShardHomes({
      sharding,
      directory: options.directory,
      servers,
      shards: MOVE.shards,
      to: MOVE.to,
      tables: ['users', 'posts', 'comments'],
      deleteOldCopies: true,
    })
  } finally {
    for (const end of ends) await end()
  }
}

/** Where the posts are after the move, read by raw SQL on every server. */
async function checkAfterMove(database: ExampleDatabase, acknowledged: ReadonlySet<string>) {
  let misplaced = 0
  for (const table of ['users', 'posts', 'comments']) {
    const rows = await database.checker.misplaced({
      table,
      sharding,
      homeOf: (shard) => movedMap.targetFor(shard),
    })
    misplaced += rows.length
  }
  const seen = new Map<string, number>()
  for (const server of database.checker.servers) {
    const cast = database.checker.dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'
    for (const row of await server.query(`SELECT ${cast} AS id FROM posts`)) {
      const id = String((row as { id: unknown }).id)
      seen.set(id, (seen.get(id) ?? 0) + 1)
    }
  }
  let lost = 0
  for (const id of acknowledged) if (!seen.has(id)) lost++
  const repeated = [...seen.values()].filter((count) => count > 1).length
  return { misplaced, lost, repeated }
}

const { values } = parseArgs({
  // `pnpm start -- --dialect=mariadb` passes the `--` on.
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    dialect: { type: 'string', default: 'postgres' },
    orm: { type: 'string', default: 'typeorm' },
    'write-ms': { type: 'string', default: '2000' },
    json: { type: 'boolean', default: false },
  },
})

if (import.meta.main) {
  const dialect = values.dialect as ExampleDialect
  const orm = values.orm as OrmName
  if (!ORMS.includes(orm)) throw new Error(`--orm takes ${ORMS.join(', ')}, got ${orm}`)
  const say = (line: string) => (values.json ? undefined : console.log(line))
  say(`Starting three ${dialect} servers (a, b, c)...`)
  const servers = await startExampleServers(dialect)
  const database = await servers.database('homes_move')
  const source = new InProcessSource({ sharding, shards: 'all' })
  // The directory, on server a: created once with the first homes; a move changes it.
  const { directory, end } = await openDirectory(dialect, database.urls.a!)
  let blog: RoutedBlog | undefined
  try {
    await directory.create(shardMap)
    blog = await openBlog(orm, { dialect, urls: database.urls, source, directory })
    const routed = blog
    const users = await routed.createUsers(
      Array.from({ length: 30 }, (_, i) => `user${i}@example.com`),
    )
    const acknowledged = new Set<string>()
    const writeErrors: Record<string, number> = {}
    const readErrors: Record<string, number> = {}
    let reads = 0
    let running = true
    let round = 0
    const writer = (async () => {
      while (running) {
        const posts = users.map((userId) => ({ userId, title: `post ${round} of ${userId}` }))
        round++
        for (const id of await retrying(writeErrors, () => routed.createPosts(posts))) {
          acknowledged.add(id)
        }
      }
    })()
    const reader = (async () => {
      while (running) {
        const ids = [...acknowledged]
        if (ids.length === 0) {
          await new Promise((resolve) => setTimeout(resolve, 10))
          continue
        }
        const id = ids[Math.floor(Math.random() * ids.length)]!
        const post = await retrying(readErrors, () => routed.findPost(id))
        if (!post) throw new Error(`Post ${id} was acknowledged but a read by ID did not find it.`)
        reads++
      }
    })()
    await new Promise((resolve) => setTimeout(resolve, Number(values['write-ms'])))
    let move: ShardHomesMoveResult
    try {
      say('Moving shards 0-15 from a to c while writing and reading...')
      move = await moveSixteenShards({ directory, urls: database.urls, dialect })
      // Keep writing a little on the new homes.
      await new Promise((resolve) => setTimeout(resolve, 500))
    } finally {
      running = false
      await Promise.all([writer, reader])
    }
    const after = await checkAfterMove(database, acknowledged)
    const onMoved = [...acknowledged].filter((id) => sharding.shardOfId(id) <= MOVE.shards.to)
    const report: MoveDemoReport = {
      dialect,
      orm,
      move,
      acknowledged: acknowledged.size,
      acknowledgedOnMovedShards: onMoved.length,
      ...after,
      reads,
      writeErrors,
      readErrors,
    }
    if (values.json) {
      console.log(
        JSON.stringify(report, (_, value) => (typeof value === 'bigint' ? `${value}` : value)),
      )
    } else {
      say(
        `${report.acknowledged} posts acknowledged (${onMoved.length} on shards 0-15), ${reads} reads by ID.`,
      )
      say(`Switch: writes to shards 0-15 waited ${move.switchMs} ms.`)
      say(
        `Retryable errors: writes ${JSON.stringify(writeErrors)}, reads ${JSON.stringify(readErrors)}.`,
      )
      say(`Lost ${after.lost}, misplaced ${after.misplaced}, repeated ${after.repeated}.`)
    }
    if (after.lost + after.misplaced + after.repeated > 0 || onMoved.length === 0) {
      process.exitCode = 1
    }
  } finally {
    await blog?.close()
    source.close()
    await directory.close()
    await end()
    await database.close()
    await servers.close()
  }
}

/** A shard directory on server a's database, and how to end its connections. */
async function openDirectory(
  dialect: ExampleDialect,
  url: string,
): Promise<{
  directory: PostgresShardDirectory | MysqlShardDirectory
  end: () => Promise<void>
}> {
  if (dialect === 'postgres') {
    const pool = new pg.Pool({ connectionString: url, max: 2 })
    return { directory: new PostgresShardDirectory(pool, { sharding }), end: () => pool.end() }
  }
  const pool = await createMysqlPool({ uri: url, connectionLimit: 2 })
  return { directory: new MysqlShardDirectory(pool, { sharding }), end: () => pool.end() }
}
