/**
 * Rows on their shard's server through Prisma: three throwaway servers of each dialect, one
 * Prisma client per server, `shardedClients` routing, checked with raw SQL on every server and
 * with each server's own statement log.
 */
import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import {
  blogSchemaSql,
  type Dialect,
  type HomeServers,
  startHomeServers,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  ShardHomes,
  WrongServerError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PrismaClient as MysqlClient } from '../generated/mysql/client/client'
import { models as mysqlModels } from '../generated/mysql/shardflake'
import { PrismaClient as PgClient } from '../generated/pg/client/client'
import { shardedIds as pgShardedIds } from '../generated/pg/shardflake'
import { type ShardedClients, shardedClients, shardedIds } from '../src'
import { closeHomes, homeOf, map, sharding } from './support/homes'

const TABLES = ['authors', 'posts', 'comments', 'profiles', 'members', 'keyed']

/** Every statement each server's client sent, by server (Prisma's query log). */
type Statements = Record<string, string[]>

function pgClientOf(url: string, source: InProcessSource, log: string[]) {
  const client = new PgClient({
    adapter: new PrismaPg({ connectionString: url, max: 4 }),
    log: [{ emit: 'event', level: 'query' }],
  })
  client.$on('query', (event) => log.push(event.query))
  return client.$extends(pgShardedIds({ source }))
}
type BlogClient = ReturnType<typeof pgClientOf>

function clientFor(dialect: Dialect, url: string, source: InProcessSource, log: string[]) {
  if (dialect === 'postgres') return pgClientOf(url, source, log)
  const target = new URL(url)
  const client = new MysqlClient({
    adapter: new PrismaMariaDb({
      host: target.hostname,
      port: Number(target.port),
      user: 'root',
      database: target.pathname.slice(1),
      connectionLimit: 4,
    }),
    log: [{ emit: 'event', level: 'query' }],
  })
  client.$on('query', (event) => log.push(event.query))
  // The same models as the PostgreSQL client (only createManyAndReturn is missing): typed as it.
  return client.$extends(shardedIds({ source, models: mysqlModels })) as unknown as BlogClient
}

/** An author email whose shard lives on `server`. */
function emailOn(server: string, tag: string): string {
  for (let i = 0; ; i++) {
    const email = `${tag}-${i}@example.com`
    if (homeOf(sharding.shardForKey(email)) === server) return email
  }
}

describe.each(['postgres', 'mysql'] as const)('shardedClients on three %s servers', (dialect) => {
  let servers: HomeServers
  let source: InProcessSource
  let homes: ShardHomes<BlogClient>
  let db: ShardedClients<BlogClient>
  const statements: Statements = { a: [], b: [], c: [] }
  const inserts = (server: string) =>
    statements[server]!.filter((sql) => /^\s*INSERT/i.test(sql)).length

  beforeAll(async () => {
    servers = await startHomeServers(dialect)
    const text = dialect === 'postgres' ? 'TEXT' : 'VARCHAR(200)'
    for (const server of servers.servers) {
      for (const sql of [
        'DROP TABLE IF EXISTS profiles',
        'DROP TABLE IF EXISTS members',
        ...blogSchemaSql(dialect),
        `CREATE TABLE profiles (id BIGINT NOT NULL PRIMARY KEY, author_id BIGINT NOT NULL UNIQUE REFERENCES authors (id), bio ${text} NOT NULL)`,
        'CREATE TABLE members (id BIGINT NOT NULL PRIMARY KEY, email VARCHAR(200) NOT NULL UNIQUE, tenant INTEGER NOT NULL)',
      ]) {
        await server.query(sql)
      }
    }
    source = new InProcessSource({ sharding, shards: 'all' })
    const clients = Object.fromEntries(
      servers.servers.map((server) => [
        server.name,
        clientFor(dialect, server.url, source, statements[server.name]!),
      ]),
    )
    homes = await ShardHomes.open({ sharding, servers: clients, directory: map })
    db = shardedClients({ homes })
  }, 120_000)

  afterAll(() => closeHomes(homes, source, servers))

  beforeEach(() => {
    for (const log of Object.values(statements)) log.length = 0
  })

  /** Rows of `table` on a server that is not their shard's home (raw SQL on every server). */
  const misplaced = (table: string, counts?: Record<string, number>) =>
    servers.misplaced({ table, sharding, homeOf, counts })

  it('writes an author with nested posts, comments and profile on its shard home', async () => {
    const made: bigint[] = []
    for (const server of ['a', 'b', 'c']) {
      const author = await db.author.create({
        data: {
          email: emailOn(server, 'nested'),
          profile: { create: { bio: 'hello' } },
          posts: { create: [{ title: 'p1', comments: { create: [{ body: 'c1' }] } }] },
        },
        include: { posts: { include: { comments: true } }, profile: true },
      })
      expect(homeOf(sharding.shardOfId(author.id))).toBe(server)
      expect(author.posts[0]!.comments).toHaveLength(1)
      made.push(author.id)
      // The whole write went to that server, and only there.
      expect(inserts(server)).toBe(4)
      for (const other of ['a', 'b', 'c'].filter((name) => name !== server)) {
        expect(statements[other]).toEqual([])
      }
      for (const log of Object.values(statements)) log.length = 0
    }
    for (const table of ['authors', 'posts', 'comments', 'profiles']) {
      const counts: Record<string, number> = {}
      expect(await misplaced(table, counts)).toEqual([])
      expect(Object.values(counts).every((n) => n > 0)).toBe(true)
    }
  })

  it('splits a createMany over servers: one INSERT per server, the count summed', async () => {
    const authors = await Promise.all(
      ['a', 'b', 'c'].map((server) =>
        db.author.create({ data: { email: emailOn(server, 'many') } }),
      ),
    )
    for (const log of Object.values(statements)) log.length = 0
    const data = Array.from({ length: 30 }, (_, i) => ({
      authorId: authors[i % 3]!.id,
      title: `many ${i}`,
    }))
    const { count } = await db.post.createMany({ data })
    expect(count).toBe(30)
    expect(data[0]).not.toHaveProperty('id') // the caller's rows are left as they were
    expect(['a', 'b', 'c'].map(inserts)).toEqual([1, 1, 1])
    expect(await misplaced('posts')).toEqual([])
    const written = await Promise.all(
      servers.servers.map((server) =>
        server.query(`SELECT COUNT(*) AS n FROM posts WHERE title LIKE 'many %'`),
      ),
    )
    expect(written.map((rows) => Number(rows[0]!.n))).toEqual([10, 10, 10])
    expect(await db.post.createMany({ data: [] })).toEqual({ count: 0 })
  })

  // MariaDB has no createManyAndReturn.
  const postgresOnly = dialect === 'postgres' ? it : () => undefined
  postgresOnly(
    'createManyAndReturn returns the rows of every server in the caller order',
    async () => {
      const authors = await Promise.all(
        ['a', 'b', 'c'].map((server) =>
          db.author.create({ data: { email: emailOn(server, 'return') } }),
        ),
      )
      for (const log of Object.values(statements)) log.length = 0
      const data = Array.from({ length: 12 }, (_, i) => ({
        authorId: authors[(i * 7) % 3]!.id,
        title: `return ${i}`,
      }))
      const rows = await db.post.createManyAndReturn({ data, select: { title: true } })
      expect(rows).toEqual(data.map(({ title }) => ({ title })))
      const full = await db.post.createManyAndReturn({ data })
      expect(full.map((row) => row.title)).toEqual(data.map((row) => row.title))
      expect(full.map((row) => homeOf(sharding.shardOfId(row.id)))).toEqual(
        data.map((row) => homeOf(sharding.shardOfId(row.authorId))),
      )
      expect(['a', 'b', 'c'].map(inserts)).toEqual([2, 2, 2])
      expect(await misplaced('posts')).toEqual([])
    },
  )

  it('reads by ID or key on one server, relations included', async () => {
    const author = await db.author.create({
      data: {
        email: emailOn('b', 'read'),
        posts: { create: { title: 'read me', comments: { create: { body: 'x' } } } },
      },
      include: { posts: true },
    })
    const postId = author.posts[0]!.id
    for (const log of Object.values(statements)) log.length = 0
    const post = await db.post.findUnique({ where: { id: postId }, include: { comments: true } })
    expect(post?.comments.map((comment) => comment.body)).toEqual(['x'])
    expect(statements.b!.length).toBeGreaterThan(0)
    expect(statements.a).toEqual([])
    expect(statements.c).toEqual([])
    const byEmail = await db.author.findUniqueOrThrow({ where: { email: author.email } })
    expect(byEmail.id).toBe(author.id)
    const through = await db
      .forId(postId)
      .post.findUnique({ where: { id: postId }, include: { author: true } })
    expect(through?.author.email).toBe(author.email)
    expect(statements.a).toEqual([])
    expect(statements.c).toEqual([])
    const updated = await db.post.update({ where: { id: postId }, data: { title: 'read again' } })
    expect(updated.title).toBe('read again')
    await expect(db.post.findUnique({ where: { title: 'read me' } as never })).rejects.toThrow(
      InvalidArgumentError,
    )
  })

  it('refuses, in a transaction, a row for another server: nothing written', async () => {
    const home = await db.author.create({ data: { email: emailOn('a', 'tx') } })
    const away = await db.author.create({ data: { email: emailOn('c', 'tx') } })
    const attempt = db.forId(home.id).$transaction(async (tx) => {
      await tx.post.create({ data: { authorId: home.id, title: 'tx refused' } })
      await tx.post.create({ data: { authorId: away.id, title: 'tx refused' } })
    })
    await expect(attempt).rejects.toThrow(WrongServerError)
    await expect(attempt).rejects.toMatchObject({ code: 'WRONG_SERVER' })
    for (const server of servers.servers) {
      const rows = await server.query(`SELECT id FROM posts WHERE title = 'tx refused'`)
      expect(rows).toEqual([])
    }
    // Outside a transaction, the same: a server's client writes only its own shards.
    await expect(
      db.forServer('a').post.create({ data: { authorId: away.id, title: 'tx refused' } }),
    ).rejects.toThrow(WrongServerError)
    await expect(
      db.forServer('a').post.createMany({ data: [{ authorId: away.id, title: 'tx refused' }] }),
    ).rejects.toThrow(WrongServerError)
    for (const server of servers.servers) {
      expect(await server.query(`SELECT id FROM posts WHERE title = 'tx refused'`)).toEqual([])
    }
    // A transaction of its own server's rows commits.

    await db.forId(away.id).$transaction(async (tx) => {
      await tx.post.create({ data: { authorId: away.id, title: 'tx kept' } })
    })
    const kept = await servers.server('c').query(`SELECT id FROM posts WHERE title = 'tx kept'`)
    expect(kept).toHaveLength(1)
  })

  it('refuses a row of another server that no foreign key would stop', async () => {
    // Tenant 30 is on shard 30, server b; a members row has no foreign key to fail on a.
    const member = db.forServer('a').$transaction(async (tx) => {
      await tx.member.create({ data: { email: 'tenant-30@example.com', tenant: 30 } })
    })
    await expect(member).rejects.toMatchObject({ code: 'WRONG_SERVER' })
    await expect(
      db.forServer('a').member.create({ data: { email: 'tenant-30@example.com', tenant: 30 } }),
    ).rejects.toThrow(WrongServerError)
    for (const server of servers.servers) {
      expect(await server.query('SELECT id FROM members WHERE tenant = 30')).toEqual([])
    }
    const routed = await db.member.create({ data: { email: 'tenant-30@example.com', tenant: 30 } })
    expect(homeOf(sharding.shardOfId(routed.id))).toBe('b')
    expect(
      await servers.server('b').query('SELECT id FROM members WHERE tenant = 30'),
    ).toHaveLength(1)
  })

  it('fans out findMany over every server, merged by ID, newest first', async () => {
    const authors = await Promise.all(
      ['a', 'b', 'c'].map((server) =>
        db.author.create({ data: { email: emailOn(server, 'fan') } }),
      ),
    )
    for (let i = 0; i < 9; i++) {
      await db.post.create({ data: { authorId: authors[i % 3]!.id, title: `fan ${i}` } })
    }
    const newest = await db.post.findManyEverywhere({
      where: { title: { startsWith: 'fan ' } },
      take: 5,
    })
    // Every server's rows by raw SQL, newest ID first. (Rows made in the same millisecond on
    // different shards order by shard, not by when they were made: compare IDs, not titles.)
    const everything: { id: bigint; title: string }[] = []
    for (const server of servers.servers) {
      const cast = dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'
      const rows = await server.query(
        `SELECT ${cast} AS id, title FROM posts WHERE title LIKE 'fan %'`,
      )
      everything.push(
        ...rows.map((row) => ({ id: BigInt(row.id as string), title: String(row.title) })),
      )
    }
    everything.sort((x, y) => (x.id < y.id ? 1 : x.id > y.id ? -1 : 0))
    expect(everything).toHaveLength(9)
    expect(newest.map((post) => post.id)).toEqual(everything.slice(0, 5).map((row) => row.id))
    expect(newest.map((post) => post.title)).toEqual(everything.slice(0, 5).map((row) => row.title))
    const oldest = await db.post.findManyEverywhere({
      where: { title: { startsWith: 'fan ' } },
      orderBy: { id: 'asc' },
      take: 2,
      select: { title: true },
    })
    expect(oldest).toEqual(
      everything
        .slice(-2)
        .reverse()
        .map(({ title }) => ({ title })),
    )
    await expect(db.post.findManyEverywhere({ orderBy: { title: 'asc' } })).rejects.toThrow(
      InvalidArgumentError,
    )
    await expect(db.post.findManyEverywhere({ skip: 1 })).rejects.toThrow(InvalidArgumentError)
  })

  it('refuses clients without shardedIds', async () => {
    const bare = await ShardHomes.open({
      sharding,
      servers: { a: {}, b: {}, c: {} },
      directory: map,
    })
    expect(() => shardedClients({ homes: bare as never })).toThrow(ConfigurationError)
    await bare.close()
    expect(() => shardedClients({ homes: 'homes' as never })).toThrow(InvalidArgumentError)
  })

  it('checks every table stayed home', async () => {
    for (const table of TABLES) expect(await misplaced(table)).toEqual([])
  })
})
