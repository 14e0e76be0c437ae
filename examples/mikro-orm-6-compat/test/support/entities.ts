/**
 * The conformance blog on MikroORM 6.6, in the two forms it offers: legacy decorators (from
 * `@mikro-orm/core`, with `ShardedId` from `@shardflake/mikro-orm/v6`) and `defineEntity`.
 */
import {
  Collection,
  defineEntity,
  Entity,
  ManyToOne,
  OneToMany,
  Property,
  p,
} from '@mikro-orm/core'
import { shardedId } from '@shardflake/mikro-orm'
import { ShardedId } from '@shardflake/mikro-orm/v6'

@Entity({ tableName: 'authors' })
export class Author {
  @ShardedId({ shardBy: 'email' }) id!: bigint
  @Property({ type: 'string', unique: true }) email!: string
}

@Entity({ tableName: 'posts' })
export class Post {
  @ShardedId({ sameShardAs: 'author' }) id!: bigint
  @ManyToOne(() => Author) author!: Author
  @Property({ type: 'string' }) title!: string
  @OneToMany(
    () => Comment,
    (comment) => comment.post,
  )
  comments = new Collection<Comment>(this)
}

@Entity({ tableName: 'comments' })
export class Comment {
  @ShardedId({ sameShardAs: 'post' }) id!: bigint
  @ManyToOne(() => Post) post!: Post
  @Property({ type: 'string' }) body!: string
}

@Entity({ tableName: 'keyed' })
export class Keyed {
  @ShardedId({ shardBy: 'shardKey' }) id!: bigint
  @Property({ type: 'string', nullable: true }) shardKey!: string | null
}

@Entity({ tableName: 'tagged' })
export class Tagged {
  @ShardedId({ shardBy: 'tenant', shardColumn: 'lshard' }) id!: bigint
  @Property({ type: 'string' }) tenant!: string
  @Property({ type: 'integer', nullable: true }) lshard?: number
}

export const legacyBlog = { Author, Post, Comment, Keyed, Tagged }

export const DefinedAuthor = defineEntity({
  name: 'DefinedAuthor',
  tableName: 'authors',
  properties: { id: shardedId({ shardBy: 'email' }), email: p.string() },
})

export const DefinedPost = defineEntity({
  name: 'DefinedPost',
  tableName: 'posts',
  properties: {
    id: shardedId({ sameShardAs: 'author' }),
    author: () => p.manyToOne(DefinedAuthor),
    title: p.string(),
    comments: () => p.oneToMany(DefinedComment).mappedBy('post'),
  },
})

export const DefinedComment = defineEntity({
  name: 'DefinedComment',
  tableName: 'comments',
  properties: {
    id: shardedId({ sameShardAs: 'post' }),
    post: () => p.manyToOne(DefinedPost),
    body: p.string(),
  },
})

export const DefinedKeyed = defineEntity({
  name: 'DefinedKeyed',
  tableName: 'keyed',
  properties: { id: shardedId({ shardBy: 'shardKey' }), shardKey: p.string().nullable() },
})

export const DefinedTagged = defineEntity({
  name: 'DefinedTagged',
  tableName: 'tagged',
  properties: {
    id: shardedId({ shardBy: 'tenant', shardColumn: 'lshard' }),
    tenant: p.string(),
    lshard: p.integer().nullable(),
  },
})

export const definedBlog = {
  Author: DefinedAuthor,
  Post: DefinedPost,
  Comment: DefinedComment,
  Keyed: DefinedKeyed,
  Tagged: DefinedTagged,
}
