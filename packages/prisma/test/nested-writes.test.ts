/**
 * Every nested shape the conformance suite cannot express, on PostgreSQL and MariaDB, checked through raw
 * SQL: IDs on the shard their rule gives, children co-located, one source call per shard per
 * level of dependency, caller IDs kept.
 */
import { CountingSource, type RawDatabase, testSharding } from '@shardflake/conformance'
import { InProcessSource, jsonReplacer, stringifyIds, trustSuppliedIds } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { blogClient, type PgBlogClient } from './support/clients'
import { blogDatabase } from './support/database'

// One in-process source per process and shard: both databases share it.
const sharding = testSharding()
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
afterAll(() => counting.close())

describe.each([
  ['PostgreSQL', 'postgres'],
  ['MariaDB', 'mysql'],
] as const)('%s', (_, dialect) => {
  const { layout } = sharding
  let raw: RawDatabase
  let prisma: PgBlogClient

  const shardOf = (id: unknown) => sharding.shardOfId(String(id))
  const postShard = (authorId: bigint) => shardOf(authorId)

  async function stored(table: string, where = '1 = 1') {
    return raw.query(`SELECT * FROM ${table} WHERE ${where} ORDER BY id`)
  }

  beforeAll(async () => {
    raw = await blogDatabase(dialect, `sf_prisma_${dialect === 'postgres' ? 'pg' : 'my'}_nested`)
    prisma = blogClient(dialect, raw.url, counting)
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    await raw?.close()
  })
  beforeEach(() => counting.reset())

  describe('nested creates', () => {
    it('fills a whole tree in one create: author, profile, posts, their comments', async () => {
      const author = await prisma.author.create({
        data: {
          email: 'tree@example.com',
          profile: { create: { bio: 'hi' } },
          posts: {
            create: [
              { title: 'tree 1', comments: { create: [{ body: 'a' }, { body: 'b' }] } },
              { title: 'tree 2', comments: { createMany: { data: [{ body: 'c' }] } } },
            ],
          },
        },
        include: { profile: true, posts: { include: { comments: true } } },
      })
      const [profile] = await stored('profiles', `author_id = ${author.id}`)
      expect(String(profile?.id)).toBe(String(author.profile?.id))
      expect(shardOf(profile?.id)).toBe(shardOf(author.id))
      const posts = await stored('posts', `author_id = ${author.id}`)
      expect(posts).toHaveLength(2)
      for (const post of posts) expect(shardOf(post.id)).toBe(postShard(author.id))
      const comments = await stored('comments', `post_id IN (${posts.map((p) => p.id).join(',')})`)
      expect(comments).toHaveLength(3)
      for (const comment of comments) {
        expect(shardOf(comment.id)).toBe(shardOf(comment.post_id))
      }
      // Every row goes where the new author goes, known from its email before any ID is made:
      // one call.
      expect(shardOf(author.id)).toBe(sharding.shardForKey('tree@example.com'))
      expect(counting.nextIdsCalls).toBe(1)
      expect(counting.idsIssued).toBe(1 + 1 + 2 + 3)
    })

    it('creates a post with its comments in one source call', async () => {
      const author = await prisma.author.create({ data: { email: 'one-call@example.com' } })
      counting.reset()
      await prisma.post.create({
        data: {
          authorId: author.id,
          title: 'one call',
          comments: { create: [{ body: '1' }, { body: '2' }, { body: '3' }] },
        },
      })
      expect(counting.nextIdsCalls).toBe(1)
      expect(counting.idsIssued).toBe(4)
    })

    it('creates the parent from the child side (post with author: { create })', async () => {
      const post = await prisma.post.create({
        data: { title: 'child side', author: { create: { email: 'child-side@example.com' } } },
      })
      const [row] = await stored('posts', `id = ${post.id}`)
      expect(String(row?.author_id)).toBe(String(post.authorId))
      expect(shardOf(post.id)).toBe(postShard(post.authorId))
    })

    it('reads the shard key from connect and from connectOrCreate by ID', async () => {
      const author = await prisma.author.create({ data: { email: 'connect@example.com' } })
      const viaConnect = await prisma.post.create({
        data: { title: 'connect', author: { connect: { id: author.id } } },
      })
      const viaConnectOrCreate = await prisma.post.create({
        data: {
          title: 'connectOrCreate',
          author: { connectOrCreate: { where: { id: author.id }, create: { email: 'unused@x' } } },
        },
      })
      expect(shardOf(viaConnect.id)).toBe(postShard(author.id))
      expect(shardOf(viaConnectOrCreate.id)).toBe(postShard(author.id))
      expect(await stored('authors', `email = 'unused@x'`)).toHaveLength(0)
    })

    it('fills nested creates inside update: create, createMany, connectOrCreate, upsert', async () => {
      const author = await prisma.author.create({ data: { email: 'update@example.com' } })
      const post = await prisma.post.create({ data: { authorId: author.id, title: 'to update' } })
      counting.reset()
      await prisma.post.update({
        where: { id: post.id },
        data: {
          comments: {
            create: [{ body: 'u1' }],
            createMany: { data: [{ body: 'u2' }, { body: 'u3' }] },
            connectOrCreate: [{ where: { id: 1n }, create: { body: 'u4' } }],
            upsert: [{ where: { id: 2n }, create: { body: 'u5' }, update: { body: 'never' } }],
          },
        },
      })
      const comments = await stored('comments', `post_id = ${post.id}`)
      expect(comments.map((c) => c.body).sort()).toEqual(['u1', 'u2', 'u3', 'u4', 'u5'])
      for (const comment of comments) expect(shardOf(comment.id)).toBe(shardOf(post.id))
      expect(counting.nextIdsCalls).toBe(1)
    })

    it("fills creates nested two levels down in update (posts.update → comments.create) on their own parent's shard", async () => {
      const author = await prisma.author.create({ data: { email: 'deep@example.com' } })
      // A post whose ID is on another shard than its author's (imported with its ID): comments
      // created under it through the author must go where the post is, not where the author is.
      const post = await trustSuppliedIds(() =>
        prisma.post.create({
          data: {
            id: layout.compose({
              timestamp: Date.now() - 86_400_000,
              shard: (shardOf(author.id) + 1) % sharding.logicalShards,
              sequence: 5,
            }),
            authorId: author.id,
            title: 'deep',
          },
        }),
      )
      expect(shardOf(post.id)).not.toBe(shardOf(author.id))
      await prisma.author.update({
        where: { id: author.id },
        data: {
          posts: {
            update: [{ where: { id: post.id }, data: { comments: { create: { body: 'deep' } } } }],
            upsert: {
              where: { id: post.id },
              create: { title: 'never' },
              update: { comments: { create: { body: 'deep upsert' } } },
            },
            create: { title: 'deep new' },
          },
          profile: { upsert: { create: { bio: 'new' }, update: { bio: 'updated' } } },
        },
      })
      const comments = await stored('comments', `body LIKE 'deep%'`)
      expect(comments.map((row) => row.body).sort()).toEqual(['deep', 'deep upsert'])
      for (const comment of comments) expect(shardOf(comment.id)).toBe(shardOf(post.id))
      const [created] = await stored('posts', `title = 'deep new'`)
      expect(shardOf(created?.id)).toBe(postShard(author.id))
      const [profile] = await stored('profiles', `author_id = ${author.id}`)
      expect(shardOf(profile?.id)).toBe(shardOf(author.id))
    })

    it('fills upsert: the create branch with its nested rows, and creates in the update branch', async () => {
      const created = await prisma.author.upsert({
        where: { email: 'upsert@example.com' },
        create: { email: 'upsert@example.com', posts: { create: { title: 'from upsert' } } },
        update: {},
        include: { posts: true },
      })
      expect(shardOf(created.posts[0]?.id)).toBe(postShard(created.id))
      const updated = await prisma.author.upsert({
        where: { id: created.id },
        create: { email: 'never@example.com' },
        update: { posts: { create: { title: 'from upsert update' } } },
        include: { posts: true },
      })
      expect(updated.id).toBe(created.id)
      expect(updated.posts).toHaveLength(2)
      for (const post of updated.posts) expect(shardOf(post.id)).toBe(postShard(created.id))
      expect(await stored('authors', `email = 'never@example.com'`)).toHaveLength(0)
    })

    it('keeps caller IDs at every level and co-locates children with a caller ID', async () => {
      const author = await prisma.author.create({ data: { email: 'caller@example.com' } })
      const chosen = layout.compose({
        timestamp: Date.now() - 86_400_000,
        shard: postShard(author.id),
        sequence: 3,
      })
      const post = await prisma.post.create({
        data: {
          id: chosen,
          authorId: author.id,
          title: 'caller',
          comments: { create: { body: 'x' } },
        },
        include: { comments: true },
      })
      expect(post.id).toBe(chosen)
      expect(shardOf(post.comments[0]?.id)).toBe(shardOf(chosen))
    })

    it('createManyAndReturn (PostgreSQL) and $shardedIds.assign + createMany: one call per shard', async () => {
      const emails = ['m1@example.com', 'm2@example.com', 'm3@example.com']
      const authors =
        dialect === 'postgres'
          ? await prisma.author.createManyAndReturn({ data: emails.map((email) => ({ email })) })
          : await Promise.all(emails.map((email) => prisma.author.create({ data: { email } })))
      expect(new Set(authors.map((a) => a.id)).size).toBe(3)
      counting.reset()
      const rows = await prisma.$shardedIds.assign(
        'Post',
        authors.flatMap((a) => [0, 1].map((i) => ({ authorId: a.id, title: `assigned ${i}` }))),
      )
      expect(counting.nextIdsCalls).toBe(new Set(authors.map((a) => postShard(a.id))).size)
      await prisma.post.createMany({ data: rows })
      const saved = await stored('posts', `title LIKE 'assigned %'`)
      expect(new Set(saved.map((r) => String(r.id)))).toEqual(
        new Set(rows.map((r) => String(r.id))),
      )
      for (const row of rows) expect(shardOf(row.id)).toBe(postShard(row.authorId))
    })

    it('assigns inside an interactive transaction and writes nothing when it rolls back', async () => {
      const author = await prisma.author.create({ data: { email: 'tx@example.com' } })
      const post = await prisma.$transaction(async (tx) =>
        tx.post.create({
          data: { authorId: author.id, title: 'in tx', comments: { create: { body: 'tx' } } },
        }),
      )
      expect(shardOf(post.id)).toBe(postShard(author.id))
      await expect(
        prisma.$transaction(async (tx) => {
          await tx.post.create({
            data: {
              authorId: author.id,
              title: 'tx rolled back',
              comments: { create: { body: 'gone' } },
            },
          })
          throw new Error('roll back')
        }),
      ).rejects.toThrow('roll back')
      expect(await stored('posts', `title = 'tx rolled back'`)).toHaveLength(0)
      expect(await stored('comments', `body = 'gone'`)).toHaveLength(0)
    })

    it('assigns in batch transactions ($transaction([...]))', async () => {
      const author = await prisma.author.create({ data: { email: 'batch-tx@example.com' } })
      const [first, second] = await prisma.$transaction([
        prisma.post.create({ data: { authorId: author.id, title: 'batch tx 1' } }),
        prisma.post.create({
          data: { authorId: author.id, title: 'batch tx 2', comments: { create: { body: 'b' } } },
        }),
      ])
      expect(first.id).not.toBe(second.id)
      expect(await stored('posts', `title LIKE 'batch tx %'`)).toHaveLength(2)
      for (const post of [first, second]) expect(shardOf(post.id)).toBe(postShard(author.id))
    })
  })

  describe('JSON', () => {
    it('writes Prisma results (bigint IDs) as strings with core stringifyIds / jsonReplacer', async () => {
      const author = await prisma.author.create({
        data: { email: 'json@example.com', posts: { create: { title: 'json' } } },
        include: { posts: true },
      })
      expect(() => JSON.stringify(author)).toThrow(TypeError)
      const parsed = JSON.parse(stringifyIds(author))
      expect(parsed.id).toBe(author.id.toString())
      expect(parsed.posts[0].authorId).toBe(author.id.toString())
      expect(JSON.stringify({ id: author.id }, jsonReplacer)).toBe(`{"id":"${author.id}"}`)
    })
  })
})
