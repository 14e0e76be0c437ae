/**
 * The same blog twice: with shardflake keys (`shardedId`) and with BIGSERIAL keys. defineEntity
 * needs no decorators, so Node runs this file as it is (type stripping).
 */
import { defineEntity, p } from '@mikro-orm/core'
import { shardedId } from '@shardflake/mikro-orm'

export const Author = defineEntity({
  name: 'Author',
  tableName: 'authors',
  properties: { id: shardedId({ shardBy: 'email' }), email: p.string() },
})

export const Post = defineEntity({
  name: 'Post',
  tableName: 'posts',
  properties: {
    id: shardedId({ sameShardAs: 'author' }), // the author's shard, read from its ID
    author: () => p.manyToOne(Author),
    title: p.string(),
    comments: () => p.oneToMany(Comment).mappedBy('post'),
  },
})

export const Comment = defineEntity({
  name: 'Comment',
  tableName: 'comments',
  properties: {
    id: shardedId({ sameShardAs: 'post' }), // the post's shard
    post: () => p.manyToOne(Post),
    body: p.string(),
  },
})

export const AutoAuthor = defineEntity({
  name: 'AutoAuthor',
  tableName: 'auto_authors',
  properties: { id: p.bigint().primary(), email: p.string() },
})

export const AutoPost = defineEntity({
  name: 'AutoPost',
  tableName: 'auto_posts',
  properties: {
    id: p.bigint().primary(),
    author: () => p.manyToOne(AutoAuthor),
    title: p.string(),
    comments: () => p.oneToMany(AutoComment).mappedBy('post'),
  },
})

export const AutoComment = defineEntity({
  name: 'AutoComment',
  tableName: 'auto_comments',
  properties: {
    id: p.bigint().primary(),
    post: () => p.manyToOne(AutoPost),
    body: p.string(),
  },
})

/** The tables (the app owns its schema; shardflake only needs BIGINT keys the database does not generate). */
export const schema = [
  'DROP TABLE IF EXISTS comments, posts, authors, auto_comments, auto_posts, auto_authors',
  'CREATE TABLE authors (id BIGINT PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE posts (id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors, title TEXT NOT NULL)',
  'CREATE TABLE comments (id BIGINT PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES posts, body TEXT NOT NULL)',
  'CREATE TABLE auto_authors (id BIGSERIAL PRIMARY KEY, email TEXT NOT NULL UNIQUE)',
  'CREATE TABLE auto_posts (id BIGSERIAL PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES auto_authors, title TEXT NOT NULL)',
  'CREATE TABLE auto_comments (id BIGSERIAL PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES auto_posts, body TEXT NOT NULL)',
]
