/**
 * The conformance blog on TypeORM: three entities and the `BlogThroughOrm` the suite drives. Test
 * files for TypeORM 0.3 import this file too, with `typeorm` aliased to `typeorm-03`.
 *
 * Two variants beside the default: `postsFollowAuthor` (posts are `sameShardAs` their `author`
 * relation, comments follow their post) and `idType: 'bigint'` (the subscriber hands out `bigint`).
 */

import type { BlogThroughOrm, OrmId, RawDatabase } from '@shardflake/conformance'
import type { IdSource } from '@shardflake/core'
import {
  Column,
  DataSource,
  type DataSourceOptions,
  Entity,
  JoinColumn,
  ManyToOne,
  OneToMany,
} from 'typeorm'
import { ShardedId, useShardedIds } from '../src'

@Entity('authors')
export class Author {
  @ShardedId({ shardBy: 'email' })
  id!: string

  @Column({ type: 'varchar' })
  email!: string
}

@Entity('posts')
export class Post {
  @ShardedId<Post>({ shardBy: 'authorId' })
  id?: string

  @Column({ type: 'bigint', name: 'author_id' })
  authorId!: string

  @Column({ type: 'varchar' })
  title!: string

  @OneToMany(
    () => Comment,
    (comment) => comment.post,
    { cascade: true },
  )
  comments?: Comment[]
}

@Entity('comments')
export class Comment {
  @ShardedId<Comment>({ sameShardAs: 'post' })
  id?: string

  @ManyToOne(
    () => Post,
    (post) => post.comments,
    { cascade: ['insert'] },
  )
  @JoinColumn({ name: 'post_id' })
  post?: Post

  @Column({ type: 'varchar' })
  body!: string
}

/** The comments table again, with its parent named by the foreign-key column. */
@Entity('comments')
export class CommentByColumn {
  @ShardedId<CommentByColumn>({ sameShardAs: 'postId' })
  id?: string

  @Column({ type: 'bigint', name: 'post_id' })
  postId?: string

  @ManyToOne(() => Post, { cascade: ['insert'] })
  @JoinColumn({ name: 'post_id' })
  post?: Post

  @Column({ type: 'varchar' })
  body!: string
}

export const entities = [Author, Post, Comment, CommentByColumn]

/** The posts table, with posts on the shard of their author: `sameShardAs` the `author` relation. */
@Entity('posts')
export class PostByAuthor {
  @ShardedId<PostByAuthor>({ sameShardAs: 'author' })
  id?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author

  @Column({ type: 'varchar' })
  title!: string

  @OneToMany(
    () => CommentOnPostByAuthor,
    (comment) => comment.post,
    { cascade: true },
  )
  comments?: CommentOnPostByAuthor[]
}

/** The comments table for {@link PostByAuthor}: two `sameShardAs` levels down from the author. */
@Entity('comments')
export class CommentOnPostByAuthor {
  @ShardedId<CommentOnPostByAuthor>({ sameShardAs: 'post' })
  id?: string

  @ManyToOne(
    () => PostByAuthor,
    (post) => post.comments,
  )
  @JoinColumn({ name: 'post_id' })
  post?: PostByAuthor

  @Column({ type: 'varchar' })
  body!: string
}

/** How {@link blogOnTypeorm} is set up. */
export interface BlogOptions {
  /** What the subscriber hands out. @default 'string' */
  idType?: 'string' | 'bigint'
  /** Posts are `sameShardAs` their author relation ({@link PostByAuthor}). @default false */
  postsFollowAuthor?: boolean
}

/** TypeORM options for the suite's database. */
export function dataSourceOptions(
  raw: RawDatabase,
  list: DataSourceOptions['entities'] = entities,
): DataSourceOptions {
  return raw.dialect === 'postgres'
    ? { type: 'postgres', url: raw.url, entities: list, extra: { max: 8 } }
    : { type: 'mariadb', url: raw.url, entities: list, extra: { connectionLimit: 8 } }
}

/** An initialized DataSource with shardflake installed. */
export async function blogDataSource(
  raw: RawDatabase,
  source: IdSource,
  extra: Partial<DataSourceOptions> = {},
  idType: 'string' | 'bigint' = 'string',
): Promise<DataSource> {
  const dataSource = new DataSource({ ...dataSourceOptions(raw), ...extra } as DataSourceOptions)
  useShardedIds(dataSource, { source, idType })
  return dataSource.initialize()
}

const post = (fields: Partial<Post>) => Object.assign(new Post(), fields)

/** The suite's blog, written through TypeORM `save()`. */
export async function blogOnTypeorm(
  raw: RawDatabase,
  source: IdSource,
  options: BlogOptions = {},
): Promise<BlogThroughOrm> {
  const idType = options.idType ?? 'string'
  if (options.postsFollowAuthor) return blogFollowingAuthors(raw, source, idType)
  const dataSource = await blogDataSource(raw, source, {}, idType)
  const posts = dataSource.getRepository(Post)
  return {
    idType,
    async createAuthor(email) {
      return (await dataSource.getRepository(Author).save(Object.assign(new Author(), { email })))
        .id
    },
    async createPost({ authorId, title, id }) {
      const saved = await posts.save(
        post({ authorId: authorId?.toString() as string, title, id: id as string | undefined }),
      )
      return saved.id!
    },
    async createPosts(list) {
      const saved = await posts.save(
        list.map((p) => post({ authorId: p.authorId.toString(), title: p.title })),
      )
      return saved.map((p) => p.id!)
    },
    async createPostWithComments(fields, bodies) {
      const saved = await posts.save(
        post({
          authorId: fields.authorId.toString(),
          title: fields.title,
          comments: bodies.map((body) => Object.assign(new Comment(), { body })),
        }),
      )
      return { postId: saved.id!, commentIds: (saved.comments ?? []).map((c) => c.id!) }
    },
    async createPostThenFail(fields) {
      await dataSource.transaction(async (manager) => {
        await manager.save(post({ authorId: fields.authorId.toString(), title: fields.title }))
        throw new Error('the transaction failed after the insert, as planned')
      })
    },
    close: () => dataSource.destroy(),
  }
}

/** The blog with {@link PostByAuthor}: every post and comment on its author's shard. */
async function blogFollowingAuthors(
  raw: RawDatabase,
  source: IdSource,
  idType: 'string' | 'bigint',
): Promise<BlogThroughOrm> {
  const dataSource = new DataSource(
    dataSourceOptions(raw, [Author, PostByAuthor, CommentOnPostByAuthor]),
  )
  useShardedIds(dataSource, { source, idType })
  await dataSource.initialize()
  const posts = dataSource.getRepository(PostByAuthor)
  // The author by reference: an unsaved-looking Author carrying only its key, as callers write it.
  const author = (id: OrmId | undefined) =>
    id === undefined ? undefined : Object.assign(new Author(), { id: id as string })
  const post = (fields: { authorId: OrmId | undefined; title: string; id?: OrmId }) =>
    Object.assign(new PostByAuthor(), {
      author: author(fields.authorId),
      title: fields.title,
      id: fields.id as string | undefined,
    })
  return {
    idType,
    async createAuthor(email) {
      return (await dataSource.getRepository(Author).save(Object.assign(new Author(), { email })))
        .id
    },
    async createPost(fields) {
      return (await posts.save(post(fields))).id!
    },
    async createPosts(list) {
      return (await posts.save(list.map(post))).map((p) => p.id!)
    },
    async createPostWithComments(fields, bodies) {
      const saved = await posts.save(
        Object.assign(post(fields), {
          comments: bodies.map((body) => Object.assign(new CommentOnPostByAuthor(), { body })),
        }),
      )
      return { postId: saved.id!, commentIds: (saved.comments ?? []).map((c) => c.id!) }
    },
    async createPostThenFail(fields) {
      await dataSource.transaction(async (manager) => {
        await manager.save(post(fields))
        throw new Error('the transaction failed after the insert, as planned')
      })
    },
    close: () => dataSource.destroy(),
  }
}

/** The in-process source behind promises: an async source with no server behind it. */
export function asAsync(inner: IdSource): IdSource {
  return {
    layout: inner.layout,
    synchronous: false,
    logicalShards: inner.logicalShards,
    nextId: async (shard, context) => inner.nextId(shard, context),
    nextIds: async (shard, count, context) => inner.nextIds(shard, count, context),
  }
}
