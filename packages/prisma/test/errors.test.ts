/**
 * Typed errors before the query runs (checked through raw SQL and the source's counters), and
 * the hand-written metadata that replaces the generator.
 */
import { CountingSource, type RawDatabase } from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  InvalidIdError,
  instagram,
  integerShard,
  MissingShardKeyError,
  UnsafeNumberError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PrismaClient } from '../generated/pg/client/client'
import { checkModels, parseShardedId, type ShardedModels, shardedIds } from '../src'
import { type PgBlogClient, pgClient } from './support/clients'
import { blogDatabase } from './support/database'

const logicalShards = 64
const counting = new CountingSource(
  new InProcessSource({ layout: instagram, shards: 'all' }),
  logicalShards,
)
let raw: RawDatabase
let prisma: PgBlogClient
let authorId: bigint

const count = async (table: string) =>
  Number((await raw.query(`SELECT COUNT(*) AS n FROM ${table}`))[0]?.n)

beforeAll(async () => {
  raw = await blogDatabase('postgres', 'sf_prisma_pg_errors')
  prisma = pgClient(raw.url, counting)
  authorId = (await prisma.author.create({ data: { email: 'errors@example.com' } })).id
})
afterAll(async () => {
  await prisma?.$disconnect()
  await raw?.close()
})
beforeEach(() => counting.reset())

describe('errors before the query', () => {
  it('MissingShardKeyError for a nested child whose key is missing, nothing allocated or written', async () => {
    const posts = await count('posts')
    const comments = await count('comments')
    const error = await prisma.author
      .update({
        where: { email: 'errors@example.com' },
        data: { posts: { create: { title: 'parent id unknown' } } },
      })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(MissingShardKeyError)
    expect((error as MissingShardKeyError).message).toContain("field 'authorId'")
    const comment = await prisma.comment
      .create({ data: { body: 'orphan', post: {} } })
      .catch((caught: unknown) => caught)
    expect(comment).toBeInstanceOf(MissingShardKeyError)
    expect(counting.idsIssued).toBe(0)
    expect(await count('posts')).toBe(posts)
    expect(await count('comments')).toBe(comments)
  })

  it('allocates nothing when one row of a nested tree lacks its key, even rows that have theirs', async () => {
    const post = await prisma.post.create({ data: { authorId, title: 'existing' } })
    counting.reset()
    const error = await prisma.author
      .update({
        where: { email: 'errors@example.com' },
        data: {
          posts: {
            // resolvable: the comment's post is named by ID
            update: { where: { id: post.id }, data: { comments: { create: { body: 'fine' } } } },
            // not resolvable: the author is named by email, so its ID (the key) is unknown
            create: { title: 'missing' },
          },
        },
      })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(MissingShardKeyError)
    expect(counting.idsIssued).toBe(0)
    const missing = await prisma.post
      .create({ data: { title: 'by email', author: { connect: { email: 'errors@example.com' } } } })
      .catch((caught: unknown) => caught)
    expect(missing).toBeInstanceOf(MissingShardKeyError)
    expect(counting.idsIssued).toBe(0)
    expect(await raw.query(`SELECT id FROM comments WHERE body = 'fine'`)).toHaveLength(0)
  })

  it('UnsafeNumberError for a number above 2^53 as an ID, a shard key or a key to a sharded ID', async () => {
    const big = 2 ** 60
    const attempts = [
      prisma.post.create({ data: { id: big, authorId, title: 'n1' } }),
      prisma.post.create({ data: { authorId: big, title: 'n2' } }),
      prisma.comment.createMany({ data: [{ postId: big, body: 'n3' }] }),
    ]
    for (const attempt of attempts) {
      await expect(attempt).rejects.toBeInstanceOf(UnsafeNumberError)
    }
    expect(counting.idsIssued).toBe(0)
    await expect(
      prisma.post.create({ data: { id: Number.NaN, authorId, title: 'n4' } }),
    ).rejects.toBeInstanceOf(UnsafeNumberError)
  })

  it('accepts a number that is a safe integer as a shard key', async () => {
    const [row] = await prisma.$shardedIds.assign('Post', [{ authorId: 70, title: 'small key' }])
    expect(instagram.shardOf(row!.id)).toBe(integerShard(70, logicalShards))
  })

  it('$shardedIds.assign refuses an unknown model and keeps given IDs', async () => {
    await expect(
      // @ts-expect-error: not a model of the schema
      prisma.$shardedIds.assign('Nope', [{}]),
    ).rejects.toBeInstanceOf(InvalidArgumentError)
    const [row] = await prisma.$shardedIds.assign('Post', [{ id: 42n, authorId, title: 'kept' }])
    expect(row?.id).toBe(42n)
    expect(counting.idsIssued).toBe(0)
    await expect(
      prisma.$shardedIds.assign('Post', [{ id: 'abc', authorId, title: 'bad' }]),
    ).rejects.toBeInstanceOf(InvalidIdError)
  })
})

describe('metadata', () => {
  it('refuses inconsistent hand-written metadata with ConfigurationError', () => {
    const source = counting
    expect(() =>
      shardedIds({
        source,
        models: { Post: { id: 'id', relations: { user: { model: 'User' } } } },
      }),
    ).toThrow(ConfigurationError)
    expect(() =>
      shardedIds({
        source,
        models: {
          Post: { id: 'id', rule: { shardBy: 'userId' }, relations: { user: { model: 'User' } } },
        },
      }),
    ).toThrow(/points to model User/)
    expect(() => checkModels({ Post: { rule: { shard: 1 } } })).toThrow(ConfigurationError)
  })

  it('parses @shardedId annotations and refuses malformed ones', () => {
    expect(parseShardedId('Post ID.\n@shardedId(shardBy: userId)', 'Post.id')).toEqual({
      shardBy: 'userId',
    })
    expect(parseShardedId('@shardedId(sameShardAs: "postId")', 'x')).toEqual({
      sameShardAs: 'postId',
    })
    expect(parseShardedId('@shardedId(shard: 3)', 'x')).toEqual({ shard: 3 })
    expect(parseShardedId('@shardedId(shardBy: zip, stringKeys: hash)', 'x')).toEqual({
      shardBy: 'zip',
      stringKeys: 'hash',
    })
    expect(parseShardedId('just a comment', 'x')).toBeUndefined()
    expect(parseShardedId(undefined, 'x')).toBeUndefined()
    for (const bad of [
      '@shardedId',
      '@shardedId()',
      '@shardedId(shardBy: a, sameShardAs: b)',
      '@shardedId(shardby: a)',
      '@shardedId(shard: -1)',
      '@shardedId(shardBy: a, stringKeys: md5)',
      '@shardedId(shardBy)',
    ]) {
      expect(() => parseShardedId(bad, 'Post.id'), bad).toThrow(ConfigurationError)
    }
  })

  it('works with metadata written by hand instead of the generator', async () => {
    const models = {
      Author: {
        id: 'id',
        rule: { shardBy: 'email' },
        relations: { posts: { model: 'Post', list: true } },
      },
      Post: {
        id: 'id',
        rule: { shardBy: (post: Record<string, unknown>) => post.title as string },
        relations: { author: { model: 'Author', fields: ['authorId'], references: ['id'] } },
      },
    } satisfies ShardedModels
    const url = raw.url
    const { PrismaPg } = await import('@prisma/adapter-pg')
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }).$extends(
      shardedIds({ source: counting, models }),
    )
    try {
      const author = await client.author.create({
        data: { email: 'by-hand@example.com', posts: { create: [{ title: '7' }, { title: '9' }] } },
        include: { posts: true },
      })
      expect(author.posts.map((post) => instagram.shardOf(post.id)).sort()).toEqual([
        integerShard(7, logicalShards),
        integerShard(9, logicalShards),
      ])
      // Comments are not in this metadata: the extension leaves them alone, Prisma inserts
      // without an ID and the database refuses (no default).
      await expect(
        client.comment.create({ data: { postId: author.posts[0]!.id, body: 'no id' } }),
      ).rejects.toThrow()
    } finally {
      await client.$disconnect()
    }
  })
})
