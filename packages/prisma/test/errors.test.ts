/**
 * Typed errors before the query runs (checked through raw SQL and the source's counters), and
 * the hand-written metadata that replaces the generator.
 */

import { PrismaPg } from '@prisma/adapter-pg'
import { CountingSource, type RawDatabase, testSharding } from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  InvalidArgumentError,
  InvalidIdError,
  InvalidShardRuleError,
  MissingShardKeyError,
  UnsafeNumberError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PrismaClient } from '../generated/pg/client/client'
import { shardedIds as boundShardedIds } from '../generated/pg/shardflake'
import { checkModels, parseShardedId, type ShardedModels, shardedIds } from '../src'
import { checkPlainComments } from '../src/generator'
import { type PgBlogClient, pgClient } from './support/clients'
import { blogDatabase } from './support/database'

const sharding = testSharding()
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
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
  counting.close()
})
beforeEach(() => counting.reset())

describe('errors before the query', () => {
  it('MissingShardKeyError for a nested child whose key is missing, nothing allocated or written', async () => {
    const posts = await count('posts')
    const comments = await count('comments')
    const error = await prisma.author
      .update({
        where: { email: 'nobody@example.com' },
        data: { posts: { create: { title: 'parent id unknown' } } },
      })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(MissingShardKeyError)
    expect((error as MissingShardKeyError).message).toContain('No Author with a id where')
    const comment = await prisma.comment
      .create({ data: { body: 'orphan', post: {} } })
      .catch((caught: unknown) => caught)
    expect(comment).toBeInstanceOf(MissingShardKeyError)
    expect(counting.idsIssued).toBe(0)
    expect(await count('posts')).toBe(posts)
    expect(await count('comments')).toBe(comments)
  })

  it('allocates nothing when one row of a nested tree has no shard, even rows that have theirs', async () => {
    const post = await prisma.post.create({ data: { authorId, title: 'existing' } })
    counting.reset()
    const error = await prisma.author
      .update({
        where: { email: 'nobody@example.com' },
        data: {
          posts: {
            // resolvable: the comment's post is named by ID
            update: { where: { id: post.id }, data: { comments: { create: { body: 'fine' } } } },
            // not resolvable: no author has this email, so the new post has no shard
            create: { title: 'missing' },
          },
        },
      })
      .catch((caught: unknown) => caught)
    expect(error).toBeInstanceOf(MissingShardKeyError)
    expect(counting.idsIssued).toBe(0)
    const missing = await prisma.post
      .create({ data: { title: 'by email', author: { connect: { email: 'nobody@example.com' } } } })
      .catch((caught: unknown) => caught)
    expect(missing).toBeInstanceOf(MissingShardKeyError)
    expect((missing as Error).message).toContain('no Author where {"email":"nobody@example.com"}')
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
    const [row] = await prisma.$shardedIds.assign('Keyed', [{ shardKey: '70' }])
    expect(sharding.shardOfId(row!.id)).toBe(sharding.shardForKey(70))
  })

  it('$shardedIds.assign refuses an unknown or unannotated model and keeps given IDs', async () => {
    await expect(
      // @ts-expect-error: not a model of the schema
      prisma.$shardedIds.assign('Nope', [{}]),
    ).rejects.toBeInstanceOf(InvalidArgumentError)
    const plain = shardedIds({
      source: counting,
      models: { Tag: { relations: {} }, Post: { id: 'id', rule: { shard: 1 } } },
    })
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: raw.url }) })
    try {
      const extended = client.$extends(plain)
      const error = await extended.$shardedIds.assign('Tag', [{ name: 'x' }]).catch((e) => e)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect(error.message).toContain('"Tag" is not a model with a sharded ID')
      expect(error.message).toContain('Those are: Post')
    } finally {
      await client.$disconnect()
    }
    const kept = sharding.layout.compose({
      timestamp: Date.now() - 86_400_000,
      shard: sharding.shardOfId(authorId),
      sequence: 42,
    })
    const [row] = await prisma.$shardedIds.assign('Post', [{ id: kept, authorId, title: 'kept' }])
    expect(row?.id).toBe(kept)
    expect(counting.idsIssued).toBe(0)
    await expect(
      prisma.$shardedIds.assign('Post', [{ id: 'abc', authorId, title: 'bad' }]),
    ).rejects.toBeInstanceOf(InvalidIdError)
  })
})

describe('metadata', () => {
  it('refuses inconsistent hand-written metadata', () => {
    const source = counting
    expect(() =>
      shardedIds({
        source,
        models: { Post: { id: 'id', relations: {} } },
      }),
    ).toThrow(InvalidShardRuleError)
    const user = { model: 'User', fields: ['userId'], references: ['id'] }
    const sharded = { User: { id: 'id', rule: { shardBy: 'email' } } }
    for (const shardBy of ['userId', 'user']) {
      expect(() =>
        checkModels({ ...sharded, Post: { id: 'id', rule: { shardBy }, relations: { user } } }),
      ).toThrow(
        expect.objectContaining({
          name: 'InvalidShardRuleError',
          message: expect.stringContaining("use { sameShardAs: 'user' }"),
        }),
      )
    }
    expect(
      checkModels({
        ...sharded,
        Post: { id: 'id', rule: { sameShardAs: 'user' }, relations: { user } },
      }).Post.rule,
    ).toEqual({ sameShardAs: 'userId' })
    expect(() =>
      checkModels({
        User: {},
        Post: { id: 'id', rule: { sameShardAs: 'userId' }, relations: { user } },
      }),
    ).toThrow(/User has no sharded ID/)
    expect(() => shardedIds({ source: undefined as never, models: sharded })).toThrow(
      ConfigurationError,
    )
    expect(() =>
      shardedIds({
        source,
        models: {
          Post: { id: 'id', rule: { shardBy: 'userId' }, relations: { user: { model: 'User' } } },
        },
      }),
    ).toThrow(/points to model User/)
    expect(() => checkModels({ Post: { rule: { shard: 1 } } })).toThrow(ConfigurationError)
    expect(() => checkModels({ Post: { id: 'id', rule: { shard: -1 } } })).toThrow(
      InvalidShardRuleError,
    )
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
    expect(parseShardedId('IDs by @shardflake/prisma.\n@shardedId(shard: 1)', 'x')).toEqual({
      shard: 1,
    })
    expect(() => checkPlainComments('// IDs by @shardflake/prisma\nmodel A {}')).not.toThrow()
    expect(() => checkPlainComments('// Reads the /// @shardedId annotations')).not.toThrow()
    expect(() =>
      checkPlainComments('model A {\n  id BigInt @id // @shardedId(shard: 1)\n}'),
    ).toThrow(/schema.prisma:2: .* is a \/\/ comment/)
    expect(parseShardedId(undefined, 'x')).toBeUndefined()
    for (const bad of [
      '@shardedId',
      '@shardedId()',
      '@shardedId(shardBy: a, sameShardAs: b)',
      '@shardedId(shardby: a)',
      '@shardedId(shard: -1)',
      '@shardedId(shardBy: a, stringKeys: md5)',
      '@shardedId(shardBy)',
      '@shardedid(shardBy: a)',
      '@shardId(shardBy: a)',
      '@shardedId(shardBy: a) @shardedId(shard: 1)',
      '@shardedId(sameShardAs: a, stringKeys: hash)',
    ]) {
      expect(() => parseShardedId(bad, 'Post.id'), bad).toThrow(InvalidShardRuleError)
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
    const client = new PrismaClient({ adapter: new PrismaPg({ connectionString: url }) }).$extends(
      shardedIds({ source: counting, models }),
    )
    try {
      const author = await client.author.create({
        data: { email: 'by-hand@example.com', posts: { create: [{ title: '7' }, { title: '9' }] } },
        include: { posts: true },
      })
      expect(author.posts.map((post) => sharding.shardOfId(post.id)).sort()).toEqual([
        sharding.shardForKey(7),
        sharding.shardForKey(9),
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

describe('the order of $extends', () => {
  it('sees fields filled by a query extension added before it, not by one added after', async () => {
    const base = new PrismaClient({ adapter: new PrismaPg({ connectionString: raw.url }) })
    const tenant = 'tenant-7'
    try {
      const before = base
        .$extends({
          query: {
            keyed: {
              create({ args, query }) {
                return query({
                  ...args,
                  data: { ...args.data, shardKey: args.data?.shardKey ?? tenant },
                })
              },
            },
          },
        })
        .$extends(boundShardedIds({ source: counting }))
      const row = await before.keyed.create({ data: {} })
      expect(sharding.shardOfId(row.id)).toBe(sharding.shardForKey(tenant))

      const after = base.$extends(boundShardedIds({ source: counting })).$extends({
        query: {
          keyed: {
            create({ args, query }) {
              return query({
                ...args,
                data: { ...args.data, shardKey: args.data?.shardKey ?? tenant },
              })
            },
          },
        },
      })
      counting.reset()
      await expect(after.keyed.create({ data: {} })).rejects.toBeInstanceOf(MissingShardKeyError)
      expect(counting.idsIssued).toBe(0)
    } finally {
      await base.$disconnect()
    }
  })
})
