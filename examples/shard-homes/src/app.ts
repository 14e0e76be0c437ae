/**
 * The example: users, posts and comments written through one ORM onto three servers, then
 * checked from the servers' side: every row on the server the shard map gives for its ID's
 * shard (raw SQL on each server, the shard read from the ID's bits), each post on its user's
 * shard and each comment on its post's, reads by ID and by key executed on one server only (the
 * servers' own statement counters), and the fan-out feed equal to the newest posts of all servers.
 */
import { type MisplacedRow, shardBits } from '@shardflake/conformance'
import { InProcessSource } from '@shardflake/core'
import type { BlogOptions, OrmName, RoutedBlog } from './blog.ts'
import { openMikroOrmBlog } from './mikro-orm.ts'
import { openPrismaBlog } from './prisma.ts'
import {
  type ExampleDatabase,
  type ExampleServers,
  serversHit,
  sharding,
  shardMap,
} from './servers.ts'
import { openTypeormBlog } from './typeorm.ts'

/** Opens the blog through an ORM. */
export function openBlog(orm: OrmName, options: BlogOptions): Promise<RoutedBlog> {
  if (orm === 'typeorm') return openTypeormBlog(options)
  if (orm === 'prisma') return openPrismaBlog(options)
  return openMikroOrmBlog(options)
}

/** How much the example writes. */
export interface Workload {
  /** @default 30 */
  readonly users?: number
  /** @default 3 */
  readonly postsPerUser?: number
  /** @default 2 */
  readonly commentsPerPost?: number
  /** How many posts and users are read back by ID and by key. @default 6 */
  readonly reads?: number
  /** The length of the fan-out feed. @default 10 */
  readonly feed?: number
}

/** What one ORM's run found. */
export interface OrmReport {
  readonly orm: OrmName
  readonly dialect: string
  /** Rows of each table on each server (raw SQL). */
  readonly rows: Record<string, Record<string, number>>
  /** Rows found on a server that is not their shard's home. */
  readonly misplaced: MisplacedRow[]
  /** Posts not on their user's shard, comments not on their post's. */
  readonly offParent: number
  /** INSERT statements each server executed for each table's one write call. */
  readonly inserts: Record<string, Record<string, number>>
  /** Reads by ID: how many, and those that ran on another server than the row's home, or more. */
  readonly readsById: ReadCheck
  readonly readsByKey: ReadCheck
  /** The fan-out feed: what it returned, and whether it is the newest posts of all servers. */
  readonly feed: { readonly ids: string[]; readonly matches: boolean }
  /** Everything that is wrong; empty when the run passed. */
  readonly problems: string[]
}

export interface ReadCheck {
  readonly reads: number
  /** Reads that executed on exactly one server, the row's home, and found the right row. */
  readonly oneServer: number
  /** The servers each read executed statements on. */
  readonly hit: string[][]
}

const homeOfId = (id: string) => shardMap.targetFor(shardBits(sharding, id))

/**
 * Runs the example through `orm` in a database of its own on the servers (`homes_<orm>`), and
 * checks it against the example's `shardMap`. `directory` routes the ORM by other homes (a
 * router that sends rows elsewhere than the map says must fail the checks).
 */
export async function runOrm(
  servers: ExampleServers,
  orm: OrmName,
  options: { readonly workload?: Workload; readonly directory?: BlogOptions['directory'] } = {},
): Promise<OrmReport> {
  const { workload = {}, directory } = options
  const users = workload.users ?? 30
  const postsPerUser = workload.postsPerUser ?? 3
  const commentsPerPost = workload.commentsPerPost ?? 2
  const reads = workload.reads ?? 6
  const feedLength = workload.feed ?? 10
  const database = await servers.database(`homes_${orm.replace('-', '_')}`)
  const source = new InProcessSource({ sharding, shards: 'all' })
  const blog = await openBlog(orm, {
    dialect: servers.dialect,
    urls: database.urls,
    source,
    ...(directory ? { directory } : {}),
  })
  const problems: string[] = []
  try {
    const inserts: Record<string, Record<string, number>> = {}
    const counted = async <T>(table: string, write: () => Promise<T>): Promise<T> => {
      await database.counter.mark()
      const result = await write()
      const counts = await database.counter.since()
      inserts[table] = Object.fromEntries(
        Object.entries(counts).map(([server, count]) => [server, count.insert]),
      )
      return result
    }

    // Writes: one call per table, each row to its shard's server.
    const emails = Array.from({ length: users }, (_, i) => `user${i}@example.com`)
    const userIds = await counted('users', () => blog.createUsers(emails))
    const postList = userIds.flatMap((userId, u) =>
      Array.from({ length: postsPerUser }, (_, i) => ({ userId, title: `post ${u}.${i}` })),
    )
    const postIds = await counted('posts', () => blog.createPosts(postList))
    const commentList = postIds.flatMap((postId, p) =>
      Array.from({ length: commentsPerPost }, (_, i) => ({ postId, body: `comment ${p}.${i}` })),
    )
    const commentIds = await counted('comments', () => blog.createComments(commentList))

    // Where the rows are: raw SQL on each server.
    const rows: Record<string, Record<string, number>> = {}
    const misplaced: MisplacedRow[] = []
    for (const table of ['users', 'posts', 'comments']) {
      const counts: Record<string, number> = {}
      misplaced.push(
        ...(await database.checker.misplaced({
          table,
          sharding,
          homeOf: (shard) => shardMap.targetFor(shard),
          counts,
        })),
      )
      rows[table] = counts
    }
    for (const [table, expected] of [
      ['users', userIds.length],
      ['posts', postIds.length],
      ['comments', commentIds.length],
    ] as const) {
      const found = Object.values(rows[table]!).reduce((sum, n) => sum + n, 0)
      if (found !== expected)
        problems.push(`${table}: ${found} rows on the servers, ${expected} written`)
    }
    if (misplaced.length > 0) {
      problems.push(`${misplaced.length} rows are not on their shard's server`)
    }
    for (const [table, server] of Object.entries(inserts)) {
      for (const [name, count] of Object.entries(server)) {
        if (count > 1) problems.push(`${table}: ${count} INSERTs on server ${name} for one call`)
        // rows there, written by one call: the server must have counted an INSERT
        if (count === 0 && (rows[table]?.[name] ?? 0) > 0) {
          problems.push(`${table}: rows on server ${name}, but it executed no INSERT`)
        }
      }
    }

    // Each post on its user's shard, each comment on its post's (read back by raw SQL).
    const offParent = await countOffParent(database)
    if (offParent > 0) problems.push(`${offParent} rows are off their parent's shard`)

    // Reads by ID: a post with its comments, one server.
    const readsById = await checkReads(database, Math.min(reads, postIds.length), async (i) => {
      const index = Math.floor((i * postIds.length) / reads)
      const id = postIds[index]!
      const post = await blog.findPost(id)
      const ok =
        post?.title === postList[index]!.title &&
        post.comments.length === commentsPerPost &&
        post.comments[0] === `comment ${index}.0`
      return { home: homeOfId(id), ok }
    })
    // Reads by key: a user by email, one server.
    const readsByKey = await checkReads(database, Math.min(reads, userIds.length), async (i) => {
      const index = Math.floor((i * userIds.length) / reads)
      const id = await blog.findUserByEmail(emails[index]!)
      return {
        home: shardMap.targetFor(sharding.shardForKey(emails[index]!)),
        ok: id === userIds[index],
      }
    })
    for (const [what, check] of [
      ['by ID', readsById],
      ['by key', readsByKey],
    ] as const) {
      if (check.oneServer !== check.reads) {
        problems.push(
          `reads ${what}: ${check.reads - check.oneServer} of ${check.reads} not answered by the home server alone (servers hit: ${JSON.stringify(check.hit)})`,
        )
      }
    }

    // The fan-out feed: the newest posts of every server, in ID order.
    const ids = await blog.newestPosts(feedLength)
    const everyPost = (
      await Promise.all(
        database.checker.servers.map((server) =>
          server.query(
            servers.dialect === 'postgres'
              ? 'SELECT id::text AS id FROM posts'
              : 'SELECT CAST(id AS CHAR) AS id FROM posts',
          ),
        ),
      )
    )
      .flat()
      .map((row) => BigInt(row.id as string))
      .sort((x, y) => (x < y ? 1 : x > y ? -1 : 0))
      .slice(0, feedLength)
      .map(String)
    const matches = JSON.stringify(ids) === JSON.stringify(everyPost)
    if (!matches) problems.push('the fan-out feed is not the newest posts of all servers')

    return {
      orm,
      dialect: servers.dialect,
      rows,
      misplaced,
      offParent,
      inserts,
      readsById,
      readsByKey,
      feed: { ids, matches },
      problems,
    }
  } finally {
    await blog.close()
    source.close()
    await database.close()
  }
}

async function checkReads(
  database: ExampleDatabase,
  reads: number,
  read: (i: number) => Promise<{ home: string; ok: boolean }>,
): Promise<ReadCheck> {
  const hit: string[][] = []
  let oneServer = 0
  for (let i = 0; i < reads; i++) {
    await database.counter.mark()
    const { home, ok } = await read(i)
    const servers = serversHit(await database.counter.since())
    hit.push(servers)
    if (ok && servers.length === 1 && servers[0] === home) oneServer++
  }
  return { reads, oneServer, hit }
}

/** Posts whose ID names another shard than their user's, comments than their post's. */
async function countOffParent(database: ExampleDatabase): Promise<number> {
  let off = 0
  const cast = (column: string) =>
    database.checker.dialect === 'postgres' ? `${column}::text` : `CAST(${column} AS CHAR)`
  for (const server of database.checker.servers) {
    for (const [table, parent] of [
      ['posts', 'user_id'],
      ['comments', 'post_id'],
    ]) {
      const rows = (await server.query(
        `SELECT ${cast('id')} AS id, ${cast(parent!)} AS parent FROM ${table}`,
      )) as { id: string; parent: string }[]
      for (const row of rows) {
        if (shardBits(sharding, row.id) !== shardBits(sharding, row.parent)) off++
      }
    }
  }
  return off
}

/** The report of one ORM's run, as lines of text. */
export function describeReport(report: OrmReport): string[] {
  const servers = Object.keys(report.rows.users ?? {})
  const perServer = (counts: Record<string, number> | undefined) =>
    servers.map((name) => `${name} ${counts?.[name] ?? 0}`).join(', ')
  return [
    `${report.orm} on ${report.dialect}: ${report.problems.length === 0 ? 'OK' : 'FAILED'}`,
    ...['users', 'posts', 'comments'].map(
      (table) =>
        `  ${table.padEnd(8)} rows: ${perServer(report.rows[table])}; INSERTs for the one call: ${perServer(report.inserts[table])}`,
    ),
    `  rows off their shard's server: ${report.misplaced.length}; off their parent's shard: ${report.offParent}`,
    `  reads by ID answered by the home server alone: ${report.readsById.oneServer}/${report.readsById.reads}; by key: ${report.readsByKey.oneServer}/${report.readsByKey.reads}`,
    `  fan-out feed of ${report.feed.ids.length} newest posts ${report.feed.matches ? 'matches' : 'DOES NOT match'} the newest posts of all servers`,
    ...report.problems.map((problem) => `  problem: ${problem}`),
  ]
}
