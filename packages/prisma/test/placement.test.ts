/**
 * Every nested write puts the child on the shard of the parent it is actually written under:
 * the parent created or connected by `connectOrCreate`, a parent named by a unique field
 * (`connect: { email }`, `update({ where: { email } })`), both branches of `upsert`, nested
 * `createMany`. Checked through raw SQL by decoding the child's and the parent's IDs.
 */
import { CountingSource, type RawDatabase, testSharding } from '@shardflake/conformance'
import { InProcessSource, InvalidArgumentError } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { blogClient } from './support/clients'
import { blogDatabase } from './support/database'

// One in-process source per process and shard: both databases share it.
const sharding = testSharding()
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
afterAll(() => counting.close())

const shardOf = (id: unknown) => sharding.shardOfId(String(id))
/** An ID on `shard` that no source hands out (a day old): a row that does not exist. */
const absentId = (shard: number, sequence: number) =>
  sharding.layout.compose({ timestamp: Date.now() - 86_400_000, shard, sequence })

describe.each([
  ['PostgreSQL', 'postgres'],
  ['MariaDB', 'mysql'],
] as const)('%s', (_, dialect) => {
  /** The `data` each operation reached Prisma with, after `shardedIds`. */
  const seen: { operation: string; args: Record<string, unknown> }[] = []
  let raw: RawDatabase
  let prisma: ReturnType<typeof inspected>
  let ada: bigint

  function inspected(url: string) {
    return blogClient(dialect, url, counting).$extends({
      query: {
        $allModels: {
          async $allOperations({ operation, args, query }) {
            seen.push({ operation, args: args as Record<string, unknown> })
            return query(args)
          },
        },
      },
    })
  }

  /** The `data` of the first operation that reached Prisma. */
  const sentData = () => (seen[0]?.args.data ?? {}) as Record<string, unknown>

  /** Comment, post and author of a comment body, as stored. */
  async function comment(body: string) {
    const [row] = await raw.query(
      `SELECT c.id, c.post_id, p.author_id FROM comments c JOIN posts p ON p.id = c.post_id WHERE c.body = '${body}'`,
    )
    expect(row, `comment ${body}`).toBeDefined()
    return { id: String(row!.id), postId: String(row!.post_id), authorId: String(row!.author_id) }
  }

  beforeAll(async () => {
    raw = await blogDatabase(dialect, `sf_prisma_${dialect === 'postgres' ? 'pg' : 'my'}_place`)
    prisma = inspected(raw.url)
    ada = (await prisma.author.create({ data: { email: 'ada@example.com' } })).id
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    await raw?.close()
  })
  beforeEach(() => {
    seen.length = 0
    counting.reset()
  })

  describe('connectOrCreate', () => {
    it("creating the parent: the child follows the created parent's shard, not the where's", async () => {
      const x = absentId((shardOf(ada) + 7) % sharding.logicalShards, 1)
      await prisma.comment.create({
        data: {
          body: 'follows the created post',
          post: {
            connectOrCreate: { where: { id: x }, create: { title: 'created', authorId: ada } },
          },
        },
      })
      const stored = await comment('follows the created post')
      expect(stored.postId).not.toBe(String(x))
      expect(stored.authorId).toBe(String(ada))
      expect(shardOf(stored.postId)).toBe(shardOf(ada))
      expect(shardOf(stored.id)).toBe(shardOf(stored.postId))
      expect(shardOf(stored.id)).not.toBe(shardOf(x))
      // what Prisma ran: a create, not a connectOrCreate
      const post = sentData().post as Record<string, unknown>
      expect(Object.keys(post)).toEqual(['create'])
    })

    it("connecting the parent: the child follows the connected parent's shard, nothing created", async () => {
      const grace = await prisma.author.create({ data: { email: 'grace@example.com' } })
      const existing = await prisma.post.create({ data: { title: 'existing', authorId: ada } })
      expect(shardOf(grace.id)).not.toBe(shardOf(ada))
      seen.length = 0
      await prisma.comment.create({
        data: {
          body: 'follows the connected post',
          post: {
            connectOrCreate: {
              where: { id: existing.id },
              create: { title: 'never created', authorId: grace.id },
            },
          },
        },
      })
      const stored = await comment('follows the connected post')
      expect(stored.postId).toBe(String(existing.id))
      expect(shardOf(stored.id)).toBe(shardOf(existing.id))
      expect(await raw.query(`SELECT id FROM posts WHERE title = 'never created'`)).toHaveLength(0)
      const post = sentData().post as Record<string, unknown>
      expect(post).toEqual({ connect: { id: existing.id } })
    })

    it('by a unique field, from the child side: an existing author, then a new one', async () => {
      const existing = await prisma.post.create({
        data: {
          title: 'to ada',
          author: {
            connectOrCreate: { where: { email: 'ada@example.com' }, create: { email: 'x' } },
          },
        },
      })
      expect(existing.authorId).toBe(ada)
      expect(shardOf(existing.id)).toBe(shardOf(ada))
      const created = await prisma.post.create({
        data: {
          title: 'to linus',
          author: {
            connectOrCreate: {
              where: { email: 'linus@example.com' },
              create: { email: 'linus@example.com' },
            },
          },
        },
      })
      const [linus] = await raw.query(`SELECT id FROM authors WHERE email = 'linus@example.com'`)
      expect(String(created.authorId)).toBe(String(linus?.id))
      expect(shardOf(linus?.id)).toBe(sharding.shardForKey('linus@example.com'))
      expect(shardOf(created.id)).toBe(shardOf(linus?.id))
    })
  })

  describe('inside an interactive transaction', () => {
    it('connectOrCreate of a parent the transaction created is refused, never duplicated', async () => {
      const error = await prisma
        .$transaction(async (tx) => {
          const post = await tx.post.create({ data: { title: 'tx parent', authorId: ada } })
          await tx.comment.create({
            data: {
              body: 'tx child',
              post: {
                connectOrCreate: {
                  where: { id: post.id },
                  create: { title: 'tx duplicate', authorId: ada },
                },
              },
            },
          })
        })
        .catch((caught: unknown) => caught)
      expect(error).toBeInstanceOf(InvalidArgumentError)
      expect((error as Error).message).toContain('Use connect when the Post exists')
      const titles = await raw.query(`SELECT title FROM posts WHERE title LIKE 'tx %'`)
      expect(titles).toHaveLength(0)
    })

    it('connectOrCreate of a committed parent connects it', async () => {
      const committed = await prisma.post.create({ data: { title: 'committed', authorId: ada } })
      await prisma.$transaction(async (tx) =>
        tx.comment.create({
          data: {
            body: 'tx child of committed',
            post: {
              connectOrCreate: {
                where: { id: committed.id },
                create: { title: 'never', authorId: ada },
              },
            },
          },
        }),
      )
      const stored = await comment('tx child of committed')
      expect(stored.postId).toBe(String(committed.id))
      expect(shardOf(stored.id)).toBe(shardOf(committed.id))
    })
  })

  describe('a parent named by a unique field', () => {
    it('connect: { email } reads the ID and pins the connect to it', async () => {
      const post = await prisma.post.create({
        data: { title: 'by email', author: { connect: { email: 'ada@example.com' } } },
      })
      expect(shardOf(post.id)).toBe(shardOf(ada))
      const author = sentData().author
      expect(author).toEqual({ connect: { email: 'ada@example.com', id: ada } })
    })

    it('update({ where: { email } }) with nested creates and createMany', async () => {
      await prisma.author.update({
        where: { email: 'ada@example.com' },
        data: {
          posts: {
            create: { title: 'nested in update', comments: { create: { body: 'deep in update' } } },
            createMany: { data: [{ title: 'many 1' }, { title: 'many 2' }] },
          },
        },
      })
      const posts = await raw.query(
        `SELECT id, author_id FROM posts WHERE title IN ('nested in update', 'many 1', 'many 2')`,
      )
      expect(posts).toHaveLength(3)
      for (const post of posts) {
        expect(String(post.author_id)).toBe(String(ada))
        expect(shardOf(post.id)).toBe(shardOf(ada))
      }
      const deep = await comment('deep in update')
      expect(shardOf(deep.id)).toBe(shardOf(ada))
      expect(seen[0]?.args.where).toEqual({ email: 'ada@example.com', id: ada })
      expect(counting.nextIdsCalls).toBe(1)
    })
  })

  describe('upsert', () => {
    it('the create branch places its children with the created row, the update branch with the existing one', async () => {
      const x = absentId((shardOf(ada) + 3) % sharding.logicalShards, 2)
      const upsert = (body: string) =>
        prisma.post.upsert({
          where: { id: x },
          create: { title: 'upserted', authorId: ada, comments: { create: { body } } },
          update: { comments: { create: { body } } },
        })
      // x is absent: the post is created on its author's shard with a new ID, with its comment
      const created = await upsert('upsert created')
      expect(created.id).not.toBe(x)
      expect(shardOf(created.id)).toBe(shardOf(ada))
      expect(shardOf((await comment('upsert created')).id)).toBe(shardOf(ada))
      const updated = await prisma.post.upsert({
        where: { id: created.id },
        create: { title: 'never', authorId: ada },
        update: { comments: { create: { body: 'upsert updated' } } },
      })
      expect(updated.id).toBe(created.id)
      const stored = await comment('upsert updated')
      expect(stored.postId).toBe(String(created.id))
      expect(shardOf(stored.id)).toBe(shardOf(created.id))
    })

    it('by a unique field: the update branch places its children with the row read, or does not run', async () => {
      const upsert = (email: string, title: string) =>
        prisma.author.upsert({
          where: { email },
          create: { email, posts: { create: { title: `${title} (created)` } } },
          update: { posts: { create: { title: `${title} (updated)` } } },
        })
      // the author exists: the update branch runs, its post goes with the author read
      await upsert('ada@example.com', 'upsert ada')
      const [post] = await raw.query(
        `SELECT id, author_id FROM posts WHERE title = 'upsert ada (updated)'`,
      )
      expect(String(post?.author_id)).toBe(String(ada))
      expect(shardOf(post?.id)).toBe(shardOf(ada))
      expect(seen[0]?.args.where).toEqual({ email: 'ada@example.com', id: ada })
      // the author does not exist: the create branch runs, with its post
      const margaret = await upsert('margaret@example.com', 'upsert margaret')
      expect(shardOf(margaret.id)).toBe(sharding.shardForKey('margaret@example.com'))
      const posts = await raw.query(
        `SELECT id, author_id, title FROM posts WHERE title LIKE 'upsert margaret%'`,
      )
      expect(posts.map((p) => p.title)).toEqual(['upsert margaret (created)'])
      expect(shardOf(posts[0]?.id)).toBe(shardOf(margaret.id))
    })

    it('nested upsert in a to-many relation: the created child follows the parent', async () => {
      const post = await prisma.post.create({ data: { title: 'nested upsert', authorId: ada } })
      await prisma.post.update({
        where: { id: post.id },
        data: {
          comments: {
            upsert: {
              where: { id: absentId(0, 3) },
              create: { body: 'nested upsert created' },
              update: { body: 'never' },
            },
          },
        },
      })
      const stored = await comment('nested upsert created')
      expect(stored.postId).toBe(String(post.id))
      expect(shardOf(stored.id)).toBe(shardOf(post.id))
    })
  })
})
