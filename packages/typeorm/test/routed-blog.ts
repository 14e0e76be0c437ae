/**
 * The routed conformance blog on TypeORM: one DataSource per server, `ShardHomes` over them,
 * written through `shardedDataSources()`. Shared by both TypeORM majors.
 */
import {
  type RoutedBlogThroughOrm,
  type RoutedSetupContext,
  type RoutedSuiteOptions,
  routedSources,
} from '@shardflake/conformance'
import { ShardHomes } from '@shardflake/core'
import * as mysqlSources from '@shardflake/mysql'
import * as postgresSources from '@shardflake/postgres'
import * as redisSources from '@shardflake/redis'
import { DataSource, type Logger } from 'typeorm'
import { shardedDataSources, shardedIds } from '../src'
import { Author, Comment, Keyed, Post } from './blog'

/** Counts the statements TypeORM sends through one DataSource. */
class CountingLogger implements Logger {
  count = 0
  logQuery(): void {
    this.count++
  }
  logQueryError(): void {}
  logQuerySlow(): void {}
  logSchemaBuild(): void {}
  logMigration(): void {}
  log(): void {}
}

/** The blog on three DataSources routed by `shardedDataSources()`. */
export async function routedBlogOnTypeorm(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const loggers: Record<string, CountingLogger> = {}
  const servers: Record<string, DataSource> = {}
  for (const [name, url] of Object.entries(urls)) {
    const logger = new CountingLogger()
    const entities = [Author, Post, Comment, Keyed]
    const dataSource = new DataSource(
      dialect === 'postgres'
        ? { type: 'postgres', url, entities, logger, extra: { max: 4 } }
        : { type: 'mariadb', url, entities, logger, extra: { connectionLimit: 4 } },
    )
    shardedIds(dataSource, { source })
    await dataSource.initialize()
    loggers[name] = logger
    servers[name] = dataSource
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedDataSources(homes)
  const post = (fields: { authorId: unknown; title: string }) =>
    Object.assign(new Post(), {
      title: fields.title,
      author: Object.assign(new Author(), { id: String(fields.authorId) }),
    })
  return {
    idType: 'string',
    async createAuthor(email) {
      return (await sharded.save(Author, Object.assign(new Author(), { email }))).id
    },
    async createPosts(list) {
      return (await sharded.save(Post, list.map(post))).map((saved) => saved.id!)
    },
    async createPostWithComments(fields, bodies) {
      const saved = await sharded.save(
        Post,
        Object.assign(post(fields), {
          comments: bodies.map((body) => Object.assign(new Comment(), { body })),
        }),
      )
      return { postId: saved.id!, commentIds: (saved.comments ?? []).map((c) => c.id!) }
    },
    async createKeyed(shardKey) {
      return (await sharded.save(Keyed, Object.assign(new Keyed(), { shardKey }))).id!
    },
    async findPostWithComments(postId) {
      const found = await sharded.repositoryFor(Post, postId).findOne({
        where: { id: String(postId) },
        relations: { comments: true },
      })
      if (!found) return undefined
      return { title: found.title, comments: (found.comments ?? []).map((c) => c.body) }
    },
    async createPostsInTransaction(list) {
      await sharded.transaction({ id: list[0]!.authorId }, async (manager) => {
        for (const fields of list) await manager.save(post(fields))
      })
    },
    async newestPosts(limit) {
      return (
        await sharded.fanOut(
          (dataSource, _server, shards) =>
            dataSource.getRepository(Post).find({
              where: { id: sharded.inShards(shards) },
              order: { id: 'DESC' },
              take: limit,
            }),
          { orderBy: (row) => row.id!, order: 'desc', limit },
        )
      ).map((row) => row.id!)
    },
    statementsSent() {
      return Object.fromEntries(Object.entries(loggers).map(([name, l]) => [name, l.count]))
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((dataSource) => dataSource.destroy()))
    },
  }
}

/** The routed suite's options for TypeORM on a dialect, with every source. */
export function routedOptions(dialect: RoutedSuiteOptions['dialect']): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnTypeorm,
  }
}
