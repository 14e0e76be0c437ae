import { defineEntity, p } from '@mikro-orm/core'
import { shardedId } from '../../src'

export const Author = defineEntity({
  name: 'Author',
  tableName: 'authors',
  properties: {
    id: shardedId({ shardBy: 'email' }),
    email: p.string(),
  },
})

export const Post = defineEntity({
  name: 'Post',
  tableName: 'posts',
  properties: {
    id: shardedId({ sameShardAs: 'author' }),
    author: () => p.manyToOne(Author),
    title: p.string(),
    comments: () => p.oneToMany(Comment).mappedBy('post'),
  },
})

export const Comment = defineEntity({
  name: 'Comment',
  tableName: 'comments',
  properties: {
    id: shardedId({ sameShardAs: 'post' }),
    post: () => p.manyToOne(Post),
    body: p.string(),
  },
})

export const Keyed = defineEntity({
  name: 'Keyed',
  tableName: 'keyed',
  properties: {
    id: shardedId({ shardBy: 'shardKey' }),
    shardKey: p.string().nullable(),
  },
})

export const Tagged = defineEntity({
  name: 'Tagged',
  tableName: 'tagged',
  properties: {
    id: shardedId({ shardBy: 'tenant', shardColumn: 'lshard' }),
    tenant: p.string(),
    lshard: p.integer().nullable(),
  },
})

export const definedBlog = { Author, Post, Comment, Keyed, Tagged }
