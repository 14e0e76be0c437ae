/**
 * What the extension hands Prisma: `createMany` / `createManyAndReturn` get every ID (filled or
 * given) as a decimal string, which Prisma checks as a 64-bit integer and stores as BIGINT;
 * `create` keeps `bigint`s (its query plan is cached). Seen by a query extension added after
 * `shardedIds` (it runs with the arguments `shardedIds` passes on), checked through raw SQL, on
 * PostgreSQL and MariaDB.
 */
import { CountingSource, type RawDatabase, testSharding } from '@shardflake/conformance'
import { InProcessSource, InvalidIdError } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { blogClient } from './support/clients'
import { blogDatabase } from './support/database'

// One in-process source per process and shard: both databases share it.
const sharding = testSharding()
const counting = new CountingSource(new InProcessSource({ sharding, shards: 'all' }))
afterAll(() => counting.close())

describe.each([
  ['PostgreSQL', 'postgres'],
  ['MariaDB', 'mysql'],
] as const)('%s', (_, dialect) => {
  /** The `data` each operation reached Prisma with, after `shardedIds`. */
  const seen: { operation: string; data: unknown }[] = []
  let raw: RawDatabase
  let prisma: ReturnType<typeof inspected>
  let authorId: bigint

  function inspected(url: string) {
    return blogClient(dialect, url, counting).$extends({
      query: {
        $allModels: {
          async $allOperations({ operation, args, query }) {
            if ('data' in args) seen.push({ operation, data: args.data })
            return query(args)
          },
        },
      },
    })
  }
  const idsSeen = (operation: string) =>
    seen
      .filter((s) => s.operation === operation)
      .flatMap((s) => (Array.isArray(s.data) ? s.data : [s.data]))
      .map((row: { id?: unknown }) => row.id)

  beforeAll(async () => {
    raw = await blogDatabase(dialect, `sf_prisma_${dialect === 'postgres' ? 'pg' : 'my'}_args`)
    prisma = inspected(raw.url)
    authorId = (await prisma.author.create({ data: { email: 'args@example.com' } })).id
  })
  afterAll(async () => {
    await prisma?.$disconnect()
    await raw?.close()
  })
  beforeEach(() => {
    seen.length = 0
    counting.reset()
  })

  it('createMany: filled and given IDs reach Prisma as decimal strings and are stored as given', async () => {
    // Given IDs on the author's shard (the rule checks them): a bigint, and a safe number (an ID
    // made at the epoch's first ms).
    const shard = sharding.shardOfId(authorId)
    const { layout } = sharding
    const given = layout.compose({ timestamp: Date.now() - 86_400_000, shard, sequence: 123 })
    const small = Number(layout.compose({ timestamp: layout.epoch, shard, sequence: 42 }))
    const rows = [
      { authorId, title: 'text 1' },
      { id: given, authorId, title: 'text 2' },
      { id: small, authorId, title: 'text 3' },
      { authorId, title: 'text 4' },
    ]
    await prisma.post.createMany({ data: rows })
    const sent = idsSeen('createMany')
    expect(sent).toHaveLength(4)
    for (const id of sent) expect(id).toMatch(/^[1-9][0-9]*$/)
    // Sorted by ID on the way (the epoch's ID, yesterday's, then the two made now).
    expect(sent[0]).toBe(String(small))
    expect(sent[1]).toBe(given.toString())
    // Prisma copied the arguments: the caller's rows are untouched
    expect(rows[0]).toEqual({ authorId, title: 'text 1' })
    expect(rows[1]?.id).toBe(given)

    const asText = dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'
    const stored = await raw.query(
      `SELECT ${asText} AS id FROM posts WHERE title LIKE 'text %' ORDER BY title`,
    )
    expect(stored.map((r) => r.id)).toEqual([sent[2], given.toString(), String(small), sent[3]])
    for (const i of [0, 3]) {
      expect(sharding.shardOfId(String(stored[i]?.id))).toBe(sharding.shardOfId(authorId))
    }
    expect(counting.idsIssued).toBe(2)
  })

  it('createMany: rows of many shards reach Prisma sorted by ID (an appending INSERT)', async () => {
    const emails = Array.from({ length: 60 }, (_, i) => `sorted-${i}@example.com`)
    const shards = emails.map((email) => sharding.shardForKey(email))
    expect(new Set(shards).size).toBeGreaterThan(10)
    await prisma.author.createMany({ data: emails.map((email) => ({ email })) })
    const sent = idsSeen('createMany').map((id) => BigInt(id as string))
    expect(sent).toHaveLength(60)
    for (let i = 1; i < sent.length; i++) expect(sent[i]! > sent[i - 1]!).toBe(true)
    // Each row kept its own ID: the stored author of each email is on that email's shard.
    const stored = await raw.query(
      `SELECT ${dialect === 'postgres' ? 'id::text' : 'CAST(id AS CHAR)'} AS id, email FROM authors WHERE email LIKE 'sorted-%'`,
    )
    expect(stored).toHaveLength(60)
    for (const row of stored) {
      expect(sharding.shardOfId(String(row.id))).toBe(sharding.shardForKey(String(row.email)))
    }
  })

  it('createMany: a given ID that is not a 64-bit integer is refused before the query', async () => {
    await expect(
      prisma.post.createMany({ data: [{ id: 2n ** 64n, authorId, title: 'too big' }] }),
    ).rejects.toBeInstanceOf(InvalidIdError)
    expect(seen).toHaveLength(0)
    expect(await raw.query(`SELECT id FROM posts WHERE title = 'too big'`)).toHaveLength(0)
  })

  // MariaDB has no createManyAndReturn
  if (dialect === 'postgres') {
    it('createManyAndReturn: strings to Prisma, bigint IDs back, the same as stored', async () => {
      const created = await prisma.author.createManyAndReturn({
        data: [{ email: 'r1@example.com' }, { email: 'r2@example.com' }],
      })
      const sent = idsSeen('createManyAndReturn')
      expect(sent).toHaveLength(2)
      for (const id of sent) expect(typeof id).toBe('string')
      for (const author of created) expect(typeof author.id).toBe('bigint')
      expect(created.map((a) => a.id.toString()).sort()).toEqual([...sent].sort())
      const stored = await raw.query(
        `SELECT id::text AS id, email FROM authors WHERE email IN ('r1@example.com', 'r2@example.com')`,
      )
      expect(stored).toHaveLength(2)
      for (const row of stored) {
        const author = created.find((a) => a.email === row.email)
        expect(author?.id.toString()).toBe(row.id)
      }
    })

    it('createManyAndReturn: sorted by ID for the INSERT, returned in the order given', async () => {
      const emails = Array.from({ length: 40 }, (_, i) => `returned-${39 - i}@example.com`)
      const created = await prisma.author.createManyAndReturn({
        data: emails.map((email) => ({ email })),
      })
      expect(created.map((a) => a.email)).toEqual(emails)
      const sent = idsSeen('createManyAndReturn').map((id) => BigInt(id as string))
      for (let i = 1; i < sent.length; i++) expect(sent[i]! > sent[i - 1]!).toBe(true)
      for (const author of created) {
        expect(sharding.shardOfId(author.id)).toBe(sharding.shardForKey(author.email))
      }
      // With a select without the ID the rows cannot be matched back: left in the order given.
      const picked = await prisma.author.createManyAndReturn({
        data: [{ email: 'returned-b@example.com' }, { email: 'returned-a@example.com' }],
        select: { email: true },
      })
      expect(picked.map((a) => a.email)).toEqual([
        'returned-b@example.com',
        'returned-a@example.com',
      ])
    })
  }

  it('create, nested createMany and $shardedIds.assign keep bigint IDs', async () => {
    const post = await prisma.post.create({
      data: { authorId, title: 'bigint', comments: { createMany: { data: [{ body: 'c' }] } } },
      include: { comments: true },
    })
    const [data] = seen.filter((s) => s.operation === 'create').map((s) => s.data)
    const sent = data as { id: unknown; comments: { createMany: { data: { id: unknown }[] } } }
    expect(sent.id).toBe(post.id)
    expect(sent.comments.createMany.data[0]?.id).toBe(post.comments[0]?.id)
    expect(typeof sent.comments.createMany.data[0]?.id).toBe('bigint')
    const [row] = await prisma.$shardedIds.assign('Post', [{ authorId, title: 'assigned' }])
    expect(typeof row?.id).toBe('bigint')
  })
})
