/**
 * The blog through Prisma: one client per server, each extended with `shardedIds`, routed by
 * `shardedClients`. The clients are generated from `prisma/postgres.prisma` and
 * `prisma/mariadb.prisma` (`pnpm generate`).
 */
import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import { type InProcessSource, ShardHomes } from '@shardflake/core'
import { shardedClients, shardedIds } from '@shardflake/prisma'
import type { BlogOptions, NewPost, RoutedBlog } from './blog.ts'
import { PrismaClient as MariadbClient } from './generated/mariadb/prisma/client.ts'
import { models as mariadbModels } from './generated/mariadb/shardflake/index.ts'
import { PrismaClient as PostgresClient } from './generated/postgres/prisma/client.ts'
import { shardedIds as postgresShardedIds } from './generated/postgres/shardflake/index.ts'
import { sharding, shardMap } from './servers.ts'

function postgresClient(url: string, source: InProcessSource) {
  return new PostgresClient({ adapter: new PrismaPg({ connectionString: url, max: 4 }) }).$extends(
    postgresShardedIds({ source }),
  )
}

/** A server's client, typed as the PostgreSQL one (the models are the same). */
type ServerClient = ReturnType<typeof postgresClient>

function mariadbClient(url: string, source: InProcessSource): ServerClient {
  const target = new URL(url)
  const client = new MariadbClient({
    adapter: new PrismaMariaDb({
      host: target.hostname,
      port: Number(target.port || 3306),
      user: decodeURIComponent(target.username),
      password: decodeURIComponent(target.password),
      database: target.pathname.slice(1),
      connectionLimit: 4,
    }),
  })
  return client.$extends(shardedIds({ source, models: mariadbModels })) as unknown as ServerClient
}

export async function openPrismaBlog({
  dialect,
  urls,
  source,
  directory = shardMap,
}: BlogOptions): Promise<RoutedBlog> {
  const servers: Record<string, ServerClient> = {}
  for (const [name, url] of Object.entries(urls)) {
    servers[name] =
      dialect === 'postgres' ? postgresClient(url, source) : mariadbClient(url, source)
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const db = shardedClients({ homes })
  const postRows = (list: readonly NewPost[]) =>
    list.map((post) => ({ userId: BigInt(post.userId), title: post.title }))
  const ids = (rows: { id: bigint }[]) => rows.map((row) => row.id.toString())

  return {
    orm: 'prisma',
    // IDs first (`$shardedIds.assign`), then one createMany: one INSERT per server. On
    // PostgreSQL, createManyAndReturn would do both in one call.
    async createUsers(emails) {
      const rows = await db.$shardedIds.assign(
        'User',
        emails.map((email) => ({ email })),
      )
      await db.user.createMany({ data: rows })
      return ids(rows)
    },
    async createPosts(list) {
      const rows = await db.$shardedIds.assign('Post', postRows(list))
      await db.post.createMany({ data: rows })
      return ids(rows)
    },
    async createComments(list) {
      const rows = await db.$shardedIds.assign(
        'Comment',
        list.map((comment) => ({ postId: BigInt(comment.postId), body: comment.body })),
      )
      await db.comment.createMany({ data: rows })
      return ids(rows)
    },
    async findPost(id) {
      const post = await db.post.findUnique({
        where: { id: BigInt(id) },
        include: { comments: { orderBy: { id: 'asc' } } },
      })
      return post
        ? { title: post.title, comments: post.comments.map((comment) => comment.body) }
        : undefined
    },
    async findUserByEmail(email) {
      return (await db.user.findUnique({ where: { email } }))?.id.toString()
    },
    async newestPosts(limit) {
      return ids(await db.post.findManyEverywhere({ take: limit, select: { id: true } }))
    },
    async createPostsDirect(server, list) {
      const client = homes.handleOf(server)
      const rows = await client.$shardedIds.assign('Post', postRows(list))
      await client.post.createMany({ data: rows })
      return ids(rows)
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((client) => client.$disconnect()))
    },
  }
}
