/**
 * The conformance blog on TypeORM: the entities and the `BlogThroughOrm` the suite drives. Test
 * files for TypeORM 0.3 import this file too, with `typeorm` aliased to `typeorm-03`.
 *
 * Variants: `parents: 'relation'` (posts and comments are `sameShardAs` their `author`/`post`
 * relation, the default) or `'column'` (`sameShardAs` the foreign-key column `authorId`/`postId`),
 * and `idType: 'bigint'`.
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
import { ShardedId, shardedIds } from '../src'

@Entity('authors')
export class Author {
  @ShardedId({ shardBy: 'email' })
  id!: string

  @Column({ type: 'varchar' })
  email!: string
}

@Entity('posts')
export class Post {
  @ShardedId<Post>({ sameShardAs: 'author' })
  id?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author

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

/** The posts table, with the author named by its foreign-key column. */
@Entity('posts')
export class PostByColumn {
  @ShardedId<PostByColumn>({ sameShardAs: 'authorId' })
  id?: string

  @Column({ type: 'bigint', name: 'author_id' })
  authorId?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author

  @Column({ type: 'varchar' })
  title!: string

  @OneToMany(
    () => CommentByColumn,
    (comment) => comment.post,
    { cascade: true },
  )
  comments?: CommentByColumn[]
}

/** The posts table, `sameShardAs` the author relation, with the foreign-key column beside it. */
@Entity('posts')
export class PostWithAuthorKey {
  @ShardedId<PostWithAuthorKey>({ sameShardAs: 'author' })
  id?: string

  @Column({ type: 'bigint', name: 'author_id' })
  authorId?: string

  @ManyToOne(() => Author)
  @JoinColumn({ name: 'author_id' })
  author?: Author

  @Column({ type: 'varchar' })
  title!: string
}

/** The comments table, with the post named by its foreign-key column. */
@Entity('comments')
export class CommentByColumn {
  @ShardedId<CommentByColumn>({ sameShardAs: 'postId' })
  id?: string

  @Column({ type: 'bigint', name: 'post_id' })
  postId?: string

  @ManyToOne(
    () => PostByColumn,
    (post) => post.comments,
    { cascade: ['insert'] },
  )
  @JoinColumn({ name: 'post_id' })
  post?: PostByColumn

  @Column({ type: 'varchar' })
  body!: string
}

@Entity('keyed')
export class Keyed {
  @ShardedId<Keyed>({ shardBy: 'shardKey' })
  id?: string

  @Column({ type: 'varchar', name: 'shard_key', nullable: true })
  shardKey?: string | null
}

@Entity('tagged')
export class Tagged {
  @ShardedId<Tagged>({ shardBy: 'tenant', shardColumn: 'lshard' })
  id?: string

  @Column({ type: 'varchar' })
  tenant!: string

  @Column({ type: 'int' })
  lshard?: number
}

/** How {@link blogOnTypeorm} is set up. */
export interface BlogOptions {
  /** What entities carry. @default 'string' */
  idType?: 'string' | 'bigint'
  /** What `sameShardAs` names: the relation or its foreign-key column. @default 'relation' */
  parents?: 'relation' | 'column'
}

/** TypeORM options for the suite's database. */
export function dataSourceOptions(
  raw: RawDatabase,
  entities: NonNullable<DataSourceOptions['entities']>,
): DataSourceOptions {
  return raw.dialect === 'postgres'
    ? { type: 'postgres', url: raw.url, entities, extra: { max: 8 } }
    : { type: 'mariadb', url: raw.url, entities, extra: { connectionLimit: 8 } }
}

type AnyPost = Post | PostByColumn
type AnyComment = Comment | CommentByColumn

/** The suite's blog, written through TypeORM repositories. */
export async function blogOnTypeorm(
  raw: RawDatabase,
  source: IdSource,
  options: BlogOptions = {},
): Promise<BlogThroughOrm> {
  const idType = options.idType ?? 'string'
  const byColumn = options.parents === 'column'
  const PostClass = byColumn ? PostByColumn : Post
  const CommentClass = byColumn ? CommentByColumn : Comment
  const dataSource = new DataSource(
    dataSourceOptions(raw, [
      Author,
      PostClass,
      CommentClass,
      Keyed,
      // A shard column needs IDs that carry a shard: not with ticket servers.
      ...(source.sharding ? [Tagged] : []),
    ]),
  )
  shardedIds(dataSource, { source, idType })
  await dataSource.initialize()
  const posts = dataSource.getRepository<AnyPost>(PostClass)
  // The author by reference, as callers write it: a relation holding only the key, or the key.
  const post = (fields: { authorId: OrmId | undefined; title: string; id?: OrmId }): AnyPost => {
    const authorId = fields.authorId as string | undefined
    return Object.assign(new PostClass(), {
      title: fields.title,
      id: fields.id as string | undefined,
      ...(byColumn
        ? { authorId }
        : {
            author:
              authorId === undefined ? undefined : Object.assign(new Author(), { id: authorId }),
          }),
    })
  }
  const comment = (body: string): AnyComment => Object.assign(new CommentClass(), { body })
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
        Object.assign(post(fields), { comments: bodies.map(comment) }) as AnyPost,
      )
      return { postId: saved.id!, commentIds: (saved.comments ?? []).map((c) => c.id!) }
    },
    async addCommentToLoadedPost(postId, body) {
      const loaded = await posts.findOneOrFail({
        where: { id: postId as string },
        relations: { comments: true },
      })
      const added = comment(body)
      ;(loaded.comments as AnyComment[]).push(added)
      await posts.save(loaded)
      return added.id!
    },
    async createPostThenFail(fields) {
      await dataSource.transaction(async (manager) => {
        await manager.save(post(fields))
        throw new Error('the transaction failed after the insert, as planned')
      })
    },
    async createKeyed(shardKey, id) {
      const keyed = Object.assign(new Keyed(), { shardKey }, id === undefined ? {} : { id })
      return (await dataSource.getRepository(Keyed).save(keyed)).id!
    },
    async upsertKeyed(id, shardKey) {
      await dataSource.getRepository(Keyed).upsert({ id: String(id), shardKey }, ['id'])
    },
    async createTagged(tenant, lshard) {
      const tagged = Object.assign(new Tagged(), { tenant, lshard })
      return (await dataSource.getRepository(Tagged).save(tagged)).id!
    },
    async createTaggedMany(tenants) {
      const rows = tenants.map((tenant) => Object.assign(new Tagged(), { tenant }))
      return (await dataSource.getRepository(Tagged).save(rows)).map((row) => row.id!)
    },
    async updateTaggedShard(id, lshard) {
      const repository = dataSource.getRepository(Tagged)
      const loaded = await repository.findOneByOrFail({ id: String(id) })
      loaded.lshard = lshard
      await repository.save(loaded)
    },
    close: () => dataSource.destroy(),
  }
}
