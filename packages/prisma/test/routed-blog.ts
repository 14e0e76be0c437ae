import { PrismaMariaDb } from '@prisma/adapter-mariadb'
import { PrismaPg } from '@prisma/adapter-pg'
import {
  type Dialect,
  type OrmId,
  type RoutedBlogThroughOrm,
  type RoutedSetupContext,
  type RoutedSuiteOptions,
  routedSources,
} from '@shardflake/conformance'
import { type IdSource, ShardHomes } from '@shardflake/core'
import * as mysqlSources from '@shardflake/mysql'
import * as postgresSources from '@shardflake/postgres'
import * as redisSources from '@shardflake/redis'
import { PrismaClient as MysqlClient } from '../generated/mysql/client/client'
import { models as mysqlModels } from '../generated/mysql/shardflake'
import { PrismaClient as PgClient } from '../generated/pg/client/client'
import { shardedIds as pgShardedIds } from '../generated/pg/shardflake'
import { shardedClients, shardedIds } from '../src'

/** One server's Prisma client on PostgreSQL, counting the statements it sends. */
function pgServerClient(url: string, source: IdSource, count: () => void) {
  const client = new PgClient({
    adapter: new PrismaPg({ connectionString: url, max: 4 }),
    log: [{ emit: 'event', level: 'query' }],
  })
  client.$on('query', count)
  return client.$extends(pgShardedIds({ source }))
}

/** A server's client: typed as the PostgreSQL one (the models are the same). */
export type ServerClient = ReturnType<typeof pgServerClient>

/** One server's Prisma client on MariaDB (adapter-mariadb), counting the statements it sends. */
function mysqlServerClient(url: string, source: IdSource, count: () => void): ServerClient {
  const target = new URL(url)
  const client = new MysqlClient({
    adapter: new PrismaMariaDb({
      host: target.hostname,
      port: Number(target.port || 3306),
      user: decodeURIComponent(target.username),
      password: decodeURIComponent(target.password),
      database: target.pathname.slice(1),
      connectionLimit: 4,
    }),
    log: [{ emit: 'event', level: 'query' }],
  })
  client.$on('query', count)
  return client.$extends(shardedIds({ source, models: mysqlModels })) as unknown as ServerClient
}

/**
 * One Prisma client per server, each extended with `shardedIds`; `ShardHomes` over them;
 * `shardedClients` routing. Creating many posts returns their IDs: through
 * `createManyAndReturn` on PostgreSQL, `$shardedIds.assign` + `createMany` on MariaDB.
 */
export async function routedBlogOnPrisma(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const sent: Record<string, number> = {}
  const servers: Record<string, ServerClient> = {}
  for (const [name, url] of Object.entries(urls)) {
    sent[name] = 0
    const count = () => {
      sent[name]! += 1
    }
    servers[name] =
      dialect === 'postgres'
        ? pgServerClient(url, source, count)
        : mysqlServerClient(url, source, count)
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const db = shardedClients({ homes })
  const key = (id: OrmId) => BigInt(id)

  return {
    idType: 'bigint',
    async createAuthor(email) {
      return (await db.author.create({ data: { email } })).id
    },
    async createPosts(posts) {
      const data = posts.map((post) => ({ authorId: key(post.authorId), title: post.title }))
      if (dialect === 'postgres') {
        return (await db.post.createManyAndReturn({ data, select: { id: true } })).map(
          (row) => row.id,
        )
      }
      const rows = await db.$shardedIds.assign('Post', data)
      await db.post.createMany({ data: rows })
      return rows.map((row) => row.id)
    },
    async createPostWithComments(post, comments) {
      const created = await db.post.create({
        data: {
          authorId: key(post.authorId),
          title: post.title,
          comments: { create: comments.map((body) => ({ body })) },
        },
        include: { comments: true },
      })
      return { postId: created.id, commentIds: created.comments.map((comment) => comment.id) }
    },
    async createKeyed(shardKey) {
      return (await db.keyed.create({ data: { shardKey } })).id
    },
    async findPostWithComments(postId) {
      const post = await db.post.findUnique({
        where: { id: key(postId) },
        include: { comments: true },
      })
      return post ? { title: post.title, comments: post.comments.map((c) => c.body) } : undefined
    },
    async createPostsInTransaction(posts) {
      const first = posts[0]
      if (!first) return
      await db.forId(key(first.authorId)).$transaction(async (tx) => {
        for (const post of posts) {
          await tx.post.create({ data: { authorId: key(post.authorId), title: post.title } })
        }
      })
    },
    async newestPosts(limit) {
      return (await db.post.findManyEverywhere({ take: limit, select: { id: true } })).map(
        (row) => row.id,
      )
    },
    statementsSent: () => ({ ...sent }),
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((client) => client.$disconnect()))
    },
  }
}

/** The routed suite's options for Prisma on a dialect, with every source. */
export function routedOptions(dialect: Dialect): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnPrisma,
  }
}
