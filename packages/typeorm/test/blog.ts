/**
 * The conformance blog on TypeORM: three entities and the `BlogThroughOrm` the suite drives. Test
 * files for TypeORM 0.3 import this file too, with `typeorm` aliased to `typeorm-03`.
 */

import type { BlogThroughOrm, RawDatabase } from '@shardflake/conformance'
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

/** TypeORM options for the suite's database. */
export function dataSourceOptions(raw: RawDatabase): DataSourceOptions {
  return raw.dialect === 'postgres'
    ? { type: 'postgres', url: raw.url, entities, extra: { max: 8 } }
    : { type: 'mariadb', url: raw.url, entities, extra: { connectionLimit: 8 } }
}

/** An initialized DataSource with shardflake installed. */
export async function blogDataSource(
  raw: RawDatabase,
  source: IdSource,
  extra: Partial<DataSourceOptions> = {},
): Promise<DataSource> {
  const dataSource = new DataSource({ ...dataSourceOptions(raw), ...extra } as DataSourceOptions)
  useShardedIds(dataSource, { source })
  return dataSource.initialize()
}

const post = (fields: Partial<Post>) => Object.assign(new Post(), fields)

/** The suite's blog, written through TypeORM `save()`. */
export async function blogOnTypeorm(raw: RawDatabase, source: IdSource): Promise<BlogThroughOrm> {
  const dataSource = await blogDataSource(raw, source)
  const posts = dataSource.getRepository(Post)
  return {
    idType: 'string',
    async createAuthor(email) {
      return (await dataSource.getRepository(Author).save(Object.assign(new Author(), { email })))
        .id
    },
    async createPost({ authorId, title, id }) {
      const saved = await posts.save(
        post({ authorId: authorId?.toString() as string, title, id: id?.toString() }),
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
