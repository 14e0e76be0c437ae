/**
 * The routed conformance blog on Sequelize: one `Sequelize` per server with the blog's models,
 * `ShardHomes` over them, written through `shardedSequelize()`.
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
import type { Model, Sequelize } from 'sequelize'
import { shardedIds, shardedSequelize } from '../../src'
import { defineBlog, sequelizeOn } from './blog'

/** The blog on three `Sequelize` instances routed by `shardedSequelize()`. */
export async function routedBlogOnSequelize(
  context: RoutedSetupContext,
): Promise<RoutedBlogThroughOrm> {
  const { dialect, sharding, directory, urls, source } = context
  const sent: Record<string, number> = {}
  const servers: Record<string, Sequelize> = {}
  for (const [name, url] of Object.entries(urls)) {
    const sequelize = sequelizeOn({ dialect, url })
    shardedIds(sequelize, { source })
    defineBlog(sequelize)
    sent[name] = 0
    // Every statement Sequelize sends to this server.
    sequelize.addHook('beforeQuery', () => {
      sent[name]!++
    })
    servers[name] = sequelize
  }
  const homes = await ShardHomes.open({ sharding, servers, directory })
  const sharded = shardedSequelize(homes)
  const idOf = (instance: Model) => instance.get('id') as string
  return {
    idType: 'string',
    async createAuthor(email) {
      return idOf(await sharded.create('Author', { email }))
    },
    async createPosts(list) {
      return (await sharded.bulkCreate('Post', [...list])).map(idOf)
    },
    async createPostWithComments(post, bodies) {
      const created = await sharded.create(
        'Post',
        { ...post, comments: bodies.map((body) => ({ body })) },
        { include: [{ association: 'comments' }] },
      )
      return {
        postId: idOf(created),
        commentIds: (created.get('comments') as Model[]).map(idOf),
      }
    },
    async createKeyed(shardKey) {
      return idOf(await sharded.create('Keyed', { shardKey }))
    },
    async findPostWithComments(postId) {
      const found = await sharded
        .modelFor('Post', postId)
        .findByPk(String(postId), { include: [{ association: 'comments' }] })
      if (!found) return undefined
      return {
        title: found.get('title') as string,
        comments: (found.get('comments') as Model[]).map((c) => c.get('body') as string),
      }
    },
    async createPostsInTransaction(list) {
      await sharded.transaction({ id: list[0]!.authorId }, async (transaction, sequelize) => {
        for (const post of list) await sequelize.models.Post!.create({ ...post }, { transaction })
      })
    },
    async newestPosts(limit) {
      const rows = await sharded.fanOut(
        (sequelize, _server, shards) =>
          sequelize.models.Post!.findAll({
            where: sharded.inShards(shards),
            order: [['id', 'DESC']],
            limit,
          }),
        { orderBy: idOf, order: 'desc', limit },
      )
      return rows.map(idOf)
    },
    statementsSent() {
      return { ...sent }
    },
    async close() {
      await homes.close()
      await Promise.all(Object.values(servers).map((sequelize) => sequelize.close()))
    },
  }
}

/** The routed suite's options for Sequelize on a dialect, with every source. */
export function routedOptions(dialect: RoutedSuiteOptions['dialect']): RoutedSuiteOptions {
  return {
    dialect,
    sources: routedSources(dialect, {
      postgres: postgresSources,
      mysql: mysqlSources,
      redis: redisSources,
    }),
    setup: routedBlogOnSequelize,
  }
}
