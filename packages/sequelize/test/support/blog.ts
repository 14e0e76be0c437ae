/**
 * The conformance blog on Sequelize: the models and the `BlogThroughOrm` the suite drives.
 *
 * Variants:
 * - `driver`: `'mysql'` (mysql2) or `'mariadb'` (the mariadb connector) on the MariaDB server;
 *   PostgreSQL always uses pg.
 * - `parents`: posts and comments are `sameShardAs` their `author` / `post` association (the
 *   default) or its foreign-key attribute `authorId` / `postId`.
 * - `writes`: `'create'` (the default: `create` with `include` for nested writes, `bulkCreate` for
 *   batches) or `'bulk'` (`bulkCreate` with `include` for nested writes, and `individualHooks: true`
 *   for batches).
 */
import type { BlogThroughOrm, OrmId, RawDatabase } from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import { DataTypes, type Dialect, type Model, Sequelize } from 'sequelize'
import { shardedId, shardedIds } from '../../src'

export interface BlogOptions {
  readonly driver?: 'mysql' | 'mariadb'
  readonly parents?: 'association' | 'column'
  readonly writes?: 'create' | 'bulk'
}

/** A Sequelize instance on the suite's database (quiet, a small pool). */
export function sequelizeOn(
  raw: Pick<RawDatabase, 'dialect' | 'url'>,
  driver: 'mysql' | 'mariadb' = 'mysql',
): Sequelize {
  const url = new URL(raw.url)
  const dialect: Dialect = raw.dialect === 'postgres' ? 'postgres' : driver
  return new Sequelize(url.pathname.slice(1), decodeURIComponent(url.username), url.password, {
    dialect,
    host: url.hostname,
    port: Number(url.port),
    logging: false,
    pool: { max: 8 },
  })
}

/** The blog's four models, defined on `sequelize` (tables `authors`, `posts`, `comments`, `keyed`). */
export function defineBlog(
  sequelize: Sequelize,
  parents: 'association' | 'column' = 'association',
) {
  const common = { timestamps: false, underscored: true }
  const Author = sequelize.define(
    'Author',
    { id: shardedId({ shardBy: 'email' }), email: DataTypes.STRING },
    { ...common, tableName: 'authors' },
  )
  const Post = sequelize.define(
    'Post',
    {
      id: shardedId({ sameShardAs: parents === 'association' ? 'author' : 'authorId' }),
      title: DataTypes.STRING,
    },
    { ...common, tableName: 'posts' },
  )
  const Comment = sequelize.define(
    'Comment',
    {
      id: shardedId({ sameShardAs: parents === 'association' ? 'post' : 'postId' }),
      body: DataTypes.STRING,
    },
    { ...common, tableName: 'comments' },
  )
  const Keyed = sequelize.define(
    'Keyed',
    { id: shardedId({ shardBy: 'shardKey' }), shardKey: DataTypes.STRING },
    { ...common, tableName: 'keyed' },
  )
  Post.belongsTo(Author, { as: 'author', foreignKey: 'authorId' })
  Post.hasMany(Comment, { as: 'comments', foreignKey: 'postId' })
  Comment.belongsTo(Post, { as: 'post', foreignKey: 'postId' })
  return { Author, Post, Comment, Keyed }
}

/** The blog through Sequelize with `shardedIds()` around `source`. */
export async function blogOnSequelize(
  raw: RawDatabase,
  source: IdSource,
  options: BlogOptions = {},
): Promise<BlogThroughOrm> {
  const sequelize = sequelizeOn(raw, options.driver)
  shardedIds(sequelize, { source })
  const { Author, Post, Comment, Keyed } = defineBlog(sequelize, options.parents)
  // A shard column needs IDs that carry a shard: ticket servers get no Tagged model.
  const Tagged = source.sharding
    ? sequelize.define(
        'Tagged',
        {
          id: shardedId({ shardBy: 'tenant', shardColumn: 'lshard' }),
          tenant: DataTypes.STRING,
          lshard: DataTypes.INTEGER,
        },
        { timestamps: false, underscored: true, tableName: 'tagged' },
      )
    : undefined
  const tagged = () => {
    if (!Tagged) throw new Error('Tagged needs a source whose IDs carry a shard')
    return Tagged
  }
  const bulk = options.writes === 'bulk'
  const idOf = (instance: Model): OrmId => instance.get('id') as OrmId
  const idsOf = (instances: Model[]) => instances.map(idOf)
  const comments = (instance: Model): Model[] => instance.get('comments') as Model[]
  return {
    idType: 'string',
    createAuthor: async (email) => idOf(await Author.create({ email })),
    createPost: async ({ authorId, title, id }) =>
      idOf(await Post.create({ authorId, title, ...(id === undefined ? {} : { id }) })),
    createPosts: async (posts) =>
      idsOf(await Post.bulkCreate([...posts], bulk ? { individualHooks: true } : {})),
    createPostWithComments: async (post, bodies) => {
      const values = { ...post, comments: bodies.map((body) => ({ body })) }
      const include = [{ model: Comment, as: 'comments' }]
      const created = bulk
        ? (await Post.bulkCreate([values], { include }))[0]!
        : await Post.create(values, { include })
      return { postId: idOf(created), commentIds: idsOf(comments(created)) }
    },
    addCommentToLoadedPost: async (postId, body) => {
      const post = await Post.findByPk(String(postId), {
        include: [{ model: Comment, as: 'comments' }],
      })
      if (!post) throw new Error(`post ${String(postId)} not found`)
      // Sequelize's way to add to a loaded collection: the association's create accessor.
      const createComment: unknown = Reflect.get(post, 'createComment')
      if (typeof createComment !== 'function') throw new Error('Post has no createComment()')
      const comment: unknown = await createComment.call(post, { body })
      if (!(comment instanceof Comment)) throw new Error('createComment() gave no Comment')
      return idOf(comment)
    },
    createPostThenFail: async (post) => {
      await sequelize.transaction(async (transaction) => {
        await Post.create(post, { transaction })
        throw new Error('rolled back on purpose')
      })
    },
    createKeyed: async (shardKey, id) =>
      idOf(await Keyed.create({ shardKey, ...(id === undefined ? {} : { id }) })),
    upsertKeyed: async (id, shardKey) => {
      await Keyed.upsert({ id, shardKey })
    },
    createTagged: async (tenant, lshard) =>
      idOf(await tagged().create({ tenant, ...(lshard === undefined ? {} : { lshard }) })),
    createTaggedMany: async (tenants) =>
      idsOf(
        await tagged().bulkCreate(
          tenants.map((tenant) => ({ tenant })),
          bulk ? { individualHooks: true } : {},
        ),
      ),
    updateTaggedShard: async (id, lshard) => {
      const loaded = await tagged().findByPk(String(id))
      if (!loaded) throw new Error(`tagged ${String(id)} not found`)
      await loaded.update({ lshard })
    },
    close: () => sequelize.close(),
  }
}
