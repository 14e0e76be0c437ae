import { Collection } from '@mikro-orm/core'
import { Entity, ManyToOne, OneToMany, Property } from '@mikro-orm/decorators/es'
import { ShardedId } from '../../src/es'

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
    (comment: Comment) => comment.post,
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

export const esBlog = { Author, Post, Comment, Keyed, Tagged }
