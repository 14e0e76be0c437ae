/**
 * IDs the extension did not make, on PostgreSQL and MariaDB, through raw SQL: a caller's ID must
 * be on the shard its rule gives (own key, parent, fixed shard; children follow a kept one), an
 * update or upsert may not move a stored row's shard key or parent to another shard than its ID's,
 * and trustSuppliedIds turns both off for imports. Then what key rewriting and collations do.
 */

import { Prisma } from '@prisma/client/extension'
import { CountingSource, type RawDatabase, testSharding } from '@shardflake/conformance'
import {
  InProcessSource,
  InvalidArgumentError,
  MisplacedIdError,
  ShardKeyChangedError,
  type ShardRule,
  UnsafeNumberError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import {
  type ModelMetadata,
  type RelationMetadata,
  type ShardedModels,
  shardedIds,
  trustSuppliedIds,
} from '../src'
import { bareClient, blogClient, models, type PgBlogClient } from './support/clients'
import { blogDatabase } from './support/database'

const sharding = testSharding()
const n = sharding.logicalShards
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
afterAll(() => counting.close())

const yesterday = () => Date.now() - 86_400_000
const idOn = (shard: number, sequence: number) =>
  sharding.layout.compose({ timestamp: yesterday(), shard, sequence })
const shardOf = (id: unknown) => sharding.shardOfId(String(id))
const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null
/** The error `promise` rejects with. */
const failure = (promise: PromiseLike<unknown>) =>
  Promise.resolve(promise).then(
    () => undefined,
    (caught: unknown) => caught,
  )

describe.each([
  ['PostgreSQL', 'postgres'],
  ['MariaDB', 'mysql'],
] as const)('%s', (_, dialect) => {
  let raw: RawDatabase
  let prisma: PgBlogClient
  /** Two authors on different shards. */
  const authors: bigint[] = []
  const count = async (sql: string) => Number(Object.values((await raw.query(sql))[0] ?? {})[0])

  beforeAll(async () => {
    raw = await blogDatabase(dialect, `sf_prisma_${dialect === 'postgres' ? 'pg' : 'my'}_checked`)
    prisma = blogClient(dialect, raw.url, counting)
    for (let i = 0; authors.length < 2; i++) {
      const email = `checked${i}@example.com`
      if (authors.length === 1 && sharding.shardForKey(email) === shardOf(authors[0])) continue
      authors.push((await prisma.author.create({ data: { email } })).id)
    }
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    await raw?.close()
  })
  beforeEach(() => counting.reset())

  describe('IDs the caller gives', () => {
    it("refuses a nested child's ID on another shard than its new parent's, before anything is allocated or written", async () => {
      const author = authors[0]!
      const error = await failure(
        prisma.post.create({
          data: {
            authorId: author,
            title: 'parent of a misplaced child',
            comments: { create: { id: idOn((shardOf(author) + 1) % n, 41), body: 'misplaced' } },
          },
        }),
      )
      expect(error).toBeInstanceOf(MisplacedIdError)
      expect(
        await count(`SELECT COUNT(*) FROM posts WHERE title = 'parent of a misplaced child'`),
      ).toBe(0)
      expect(counting.idsIssued).toBe(0)
    })

    it('inside trustSuppliedIds keeps a misplaced parent ID, and its nested children follow the ID', async () => {
      const author = authors[0]!
      const shard = (shardOf(author) + 1) % n
      const post = await trustSuppliedIds(() =>
        prisma.post.create({
          data: {
            id: idOn(shard, 42),
            authorId: author,
            title: 'imported post',
            comments: { create: [{ body: 'imported 1' }, { body: 'imported 2' }] },
          },
          include: { comments: true },
        }),
      )
      expect(shardOf(post.id)).toBe(shard)
      const stored = await raw.query(`SELECT id FROM comments WHERE post_id = ${post.id}`)
      expect(stored).toHaveLength(2)
      for (const row of stored) expect(shardOf(row.id)).toBe(shard)
      await raw.query(`DELETE FROM comments WHERE post_id = ${post.id}`)
      await raw.query(`DELETE FROM posts WHERE id = ${post.id}`)
    })

    it('refuses a number above 2^53 written into an update, as an ID or a key to one', async () => {
      const post = await prisma.post.create({ data: { authorId: authors[0]!, title: 'numbers' } })
      const comment = await prisma.comment.create({ data: { postId: post.id, body: 'numbers' } })
      const error = await failure(
        prisma.comment.update({ where: { id: comment.id }, data: { postId: Number(post.id) } }),
      )
      expect(error).toBeInstanceOf(UnsafeNumberError)
    })
  })

  describe('a stored row whose key moves to another shard', () => {
    const member = async (email: string, tenant: number) =>
      (await prisma.member.create({ data: { email, tenant } })).id
    const tenantOf = async (email: string) =>
      Number((await raw.query(`SELECT tenant FROM members WHERE email = '${email}'`))[0]?.tenant)

    it('refuses update() and upsert() of the key by ID or by another unique field, in any spelling', async () => {
      const id = await member('mover@example.com', 7)
      counting.reset()
      const attempts = [
        prisma.member.update({ where: { id }, data: { tenant: 8 } }),
        prisma.member.update({
          where: { email: 'mover@example.com' },
          data: { tenant: { set: 8 } },
        }),
        prisma.member.update({ where: { id }, data: { tenant: { increment: 1 } } }),
        prisma.member.upsert({
          where: { email: 'mover@example.com' },
          create: { email: 'mover@example.com', tenant: 8 },
          update: { tenant: 8 },
        }),
        prisma.member.upsert({
          where: { id },
          create: { email: 'other@example.com', tenant: 8 },
          update: { tenant: 8 },
        }),
      ]
      for (const attempt of attempts) {
        expect(await failure(attempt)).toBeInstanceOf(ShardKeyChangedError)
      }
      expect(await tenantOf('mover@example.com')).toBe(7)
      expect(counting.idsIssued).toBe(0)
    })

    it('lets a key move within its shard, an upsert create, and any move inside trustSuppliedIds', async () => {
      const id = await member('stayer@example.com', 9)
      await prisma.member.update({
        where: { email: 'stayer@example.com' },
        data: { tenant: 9 + n },
      })
      expect(await tenantOf('stayer@example.com')).toBe(9 + n)
      const created = await prisma.member.upsert({
        where: { email: 'newcomer@example.com' },
        create: { email: 'newcomer@example.com', tenant: 10 },
        update: { tenant: 11 },
      })
      expect(shardOf(created.id)).toBe(10)
      await trustSuppliedIds(() =>
        prisma.member.update({ where: { id }, data: { tenant: { increment: 1 } } }),
      )
      expect(await tenantOf('stayer@example.com')).toBe(10 + n)
    })

    it('refuses moving a comment to a post on another shard: by key, by connect, to a new post', async () => {
      const [home, away] = await Promise.all(
        authors.map((authorId, i) =>
          prisma.post.create({ data: { authorId, title: `post ${i}` } }),
        ),
      )
      const comment = await prisma.comment.create({ data: { postId: home!.id, body: 'stays' } })
      const attempts = [
        prisma.comment.update({ where: { id: comment.id }, data: { postId: away!.id } }),
        prisma.comment.update({
          where: { id: comment.id },
          data: { post: { connect: { id: away!.id } } },
        }),
        prisma.comment.update({
          where: { id: comment.id },
          data: { post: { create: { authorId: authors[1]!, title: 'new away' } } },
        }),
      ]
      for (const attempt of attempts) {
        expect(await failure(attempt)).toBeInstanceOf(ShardKeyChangedError)
      }
      const [row] = await raw.query(`SELECT post_id FROM comments WHERE id = ${comment.id}`)
      expect(String(row?.post_id)).toBe(String(home!.id))
      expect(await count(`SELECT COUNT(*) FROM posts WHERE title = 'new away'`)).toBe(0)
      // A post on the same shard is fine: a new one under the same author.
      await prisma.comment.update({
        where: { id: comment.id },
        data: { post: { create: { authorId: authors[0]!, title: 'new home' } } },
      })
    })
  })

  describe('keys rewritten, keys a collation calls equal', () => {
    /** An extension that lowercases the email of a new author, as apps normalize keys. */
    const lowercase = Prisma.defineExtension({
      query: {
        $allModels: {
          async create({ model, args, query }) {
            const data: unknown = args.data
            if (model === 'Author' && isRecord(data) && typeof data.email === 'string') {
              data.email = data.email.toLowerCase()
            }
            return query(args)
          },
        },
      },
    })

    it('places by the rewritten key when the rewriting extension comes first, by the old one when it comes after', async () => {
      const bare = bareClient(dialect, raw.url)
      const extension = shardedIds({ source: counting, models })
      try {
        const before = bare.$extends(lowercase).$extends(extension)
        const after = bare.$extends(extension).$extends(lowercase)
        const first = await before.author.create({ data: { email: 'Rewritten-First@Example.com' } })
        const second = await after.author.create({ data: { email: 'Rewritten-After@Example.com' } })
        expect(first.email).toBe('rewritten-first@example.com')
        expect(shardOf(first.id)).toBe(sharding.shardForKey('rewritten-first@example.com'))
        expect(second.email).toBe('rewritten-after@example.com')
        expect(shardOf(second.id)).toBe(sharding.shardForKey('Rewritten-After@Example.com'))
        await raw.query(`DELETE FROM authors WHERE id = ${second.id}`)
      } finally {
        await bare.$disconnect()
      }
    })

    it("connects a child by its parent's unique key in another spelling to the parent's shard, read from the parent's ID", async () => {
      const author = await prisma.author.create({ data: { email: 'spelled@example.com' } })
      if (dialect === 'mysql') {
        // MariaDB's default collation ignores case and trailing spaces: 'Spelled@...' is the
        // same author, whose email hashes elsewhere.
        const post = await prisma.post.create({
          data: { title: 'spelled', author: { connect: { email: 'SPELLED@example.com ' } } },
        })
        expect(post.authorId).toBe(author.id)
        expect(shardOf(post.id)).toBe(shardOf(author.id))
      } else {
        expect(
          await failure(
            prisma.post.create({
              data: { title: 'spelled', author: { connect: { email: 'SPELLED@example.com' } } },
            }),
          ),
        ).toBeInstanceOf(Error) // PostgreSQL compares exactly: there is no such author
      }
    })
  })

  it('refuses a misspelt option of shardedIds, naming the closest', () => {
    expect(() =>
      shardedIds({ source: counting, models, modles: models } as Parameters<typeof shardedIds>[0]),
    ).toThrow(InvalidArgumentError)
    expect(() =>
      shardedIds({ source: counting, models, model: models } as Parameters<typeof shardedIds>[0]),
    ).toThrow(/Did you mean "models"/)
    // Hand-written models: a misspelt property of a model, a rule or a relation.
    const misspelt: ShardedModels[] = [
      { Tag: { id: 'id', rule: { shard: 1 }, relation: {} } as ModelMetadata },
      { Tag: { id: 'id', rule: { shardBy: 'name', stringkeys: 'hash' } as ShardRule } },
      {
        Tag: {
          id: 'id',
          rule: { shard: 1 },
          relations: { tags: { model: 'Tag', feilds: [] } as RelationMetadata },
        },
      },
    ]
    for (const models of misspelt) {
      expect(() => shardedIds({ source: counting, models }), JSON.stringify(models)).toThrow(
        InvalidArgumentError,
      )
    }
  })
})

it('checks a caller ID against a fixed shard too (hand-written models, PostgreSQL)', async () => {
  const raw = await blogDatabase('postgres', 'sf_prisma_pg_fixed')
  const pinned = shardedIds({
    source: counting,
    models: { ...models, Keyed: { id: 'id', rule: { shard: 3 }, relations: {} } },
  })
  const prisma = bareClient('postgres', raw.url).$extends(pinned)
  try {
    const error = await failure(prisma.keyed.create({ data: { id: idOn(4, 51), shardKey: 'x' } }))
    expect(error).toBeInstanceOf(MisplacedIdError)
    const kept = await prisma.keyed.create({ data: { id: idOn(3, 51), shardKey: 'x' } })
    expect(shardOf(kept.id)).toBe(3)
    expect(await raw.query('SELECT id FROM keyed')).toHaveLength(1)
  } finally {
    await prisma.$disconnect()
    await raw.close()
  }
})
