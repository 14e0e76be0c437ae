/**
 * Placement is decided by the rule as of flush, whatever the source: an ID given at `em.create()`
 * whose shard no longer matches is replaced when nothing references the entity, and refused
 * with ShardKeyChangedError when something does. Never silent.
 */
import { defineEntity, type MikroORM, p, type RequiredEntityData } from '@mikro-orm/core'
import {
  asAsync,
  blogSchemaSql,
  CountingSource,
  expectedShard,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import { InProcessSource, MissingShardKeyError } from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { ShardKeyChangedError, shardedId, shardedIds } from '../src'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

const sharding = testSharding(64)
const entities = [Author, Post, Comment, Keyed]
const inProcess = new InProcessSource({ sharding, shards: 'all' })
const sync = new CountingSource(inProcess)
const async = new CountingSource(asAsync(inProcess))
let raw: RawDatabase
let syncOrm: MikroORM
let asyncOrm: MikroORM

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro_placement')
  for (const sql of blogSchemaSql('postgres')) await raw.query(sql)
  syncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: sync })])
  asyncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: async })])
})
afterAll(async () => {
  await syncOrm?.close(true)
  await asyncOrm?.close(true)
  await raw?.close()
  inProcess.close()
})
beforeEach(() => {
  sync.reset()
  async.reset()
})

const shardOf = (id: unknown) => sharding.shardOfId(String(id))
const count = async (sql: string, params: unknown[] = []) =>
  Number((await raw.query(sql, params))[0]?.n)

describe('with an in-process (sync) source', () => {
  it('gives the ID at em.create(), under which the identity map holds the entity', async () => {
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: 'early@example.com' })
    expect(typeof author.id).toBe('bigint')
    expect(shardOf(author.id)).toBe(expectedShard('early@example.com', 64))
    expect(em.getUnitOfWork().getById(Author, author.id)).toBe(author)
    const post = em.create(Post, { author, title: 'early post' })
    expect(shardOf(post.id)).toBe(shardOf(author.id))
    await em.flush()
    expect(await count('SELECT COUNT(*) AS n FROM posts WHERE id = $1', [post.id])).toBe(1)
  })

  it('replaces at flush an early ID whose shard key changed, when nothing references it', async () => {
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: 'before@example.com' })
    const early = author.id
    author.email = 'after@example.com'
    expect(expectedShard('after@example.com', 64)).not.toBe(shardOf(early))
    await em.flush()
    expect(author.id).not.toBe(early)
    expect(shardOf(author.id)).toBe(expectedShard('after@example.com', 64))
    const [row] = await raw.query('SELECT id FROM authors WHERE email = $1', ['after@example.com'])
    expect(String(row?.id)).toBe(String(author.id))
    const uow = em.getUnitOfWork()
    expect(uow.getById(Author, author.id)).toBe(author)
    expect(uow.getById(Author, early)).toBeUndefined()
  })

  it("replaces at flush a post's early ID when its author changed before the flush", async () => {
    const setup = syncOrm.em.fork()
    const [first, second] = ['p1@example.com', 'p2@example.com'].map((email) =>
      setup.create(Author, { email }),
    )
    await setup.flush()
    expect(shardOf(first!.id)).not.toBe(shardOf(second!.id))
    const em = syncOrm.em.fork()
    const post = em.create(Post, { author: em.getReference(Author, first!.id), title: 'moved' })
    expect(shardOf(post.id)).toBe(shardOf(first!.id))
    post.author = em.getReference(Author, second!.id)
    await em.flush()
    const [row] = await raw.query('SELECT id, author_id FROM posts WHERE title = $1', ['moved'])
    expect(String(row?.author_id)).toBe(String(second!.id))
    expect(shardOf(row?.id)).toBe(shardOf(second!.id))
  })

  it('refuses, writing nothing, an early ID whose key changed when a child already references it', async () => {
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: 'referenced@example.com' })
    em.create(Post, { author, title: 'follows the old shard' })
    author.email = 'changed@example.com'
    const failure = em.flush()
    await expect(failure).rejects.toBeInstanceOf(ShardKeyChangedError)
    await expect(failure).rejects.toThrow(/Post.author already references it/)
    expect(await count("SELECT COUNT(*) AS n FROM authors WHERE email LIKE '%d@example.com'")).toBe(
      0,
    )
  })

  it('assigns at flush an entity whose shard key was set after em.create()', async () => {
    const em = syncOrm.em.fork()
    const post = em.create(Post, { title: 'author later' } as Post)
    expect(post.id).toBeUndefined()
    post.author = em.create(Author, { email: 'late@example.com' })
    await em.flush()
    expect(shardOf(post.id)).toBe(expectedShard('late@example.com', 64))
  })
})

describe('with an async (database-like) source', () => {
  it('places by the rule as of flush: the shard key set last decides', async () => {
    const em = asyncOrm.em.fork()
    const author = em.create(Author, { email: 'async-before@example.com' })
    expect(author.id).toBeUndefined()
    author.email = 'async-after@example.com'
    await em.flush()
    expect(shardOf(author.id)).toBe(expectedShard('async-after@example.com', 64))
  })

  it('assigns a whole flush in one nextIds per shard, children carrying their parent keys', async () => {
    const em = asyncOrm.em.fork()
    const authors = ['a1@example.com', 'a2@example.com', 'a3@example.com'].map((email) =>
      em.create(Author, { email }),
    )
    for (const [a, author] of authors.entries()) {
      for (const i of [0, 1]) {
        em.create(Post, {
          author,
          title: `flush ${a}.${i}`,
          comments: [{ body: `c ${a}.${i}` }, { body: `d ${a}.${i}` }],
        } as RequiredEntityData<Post>)
      }
    }
    await em.flush()
    const shards = new Set(authors.map((author) => shardOf(author.id)))
    expect(async.nextIdCalls).toBe(0)
    expect(async.nextIdsCalls).toBe(shards.size)
    expect(async.idsIssued).toBe(3 + 6 + 12)
    const stored = await raw.query(
      `SELECT c.id AS comment, c.post_id AS post, p.author_id AS author FROM comments c
       JOIN posts p ON p.id = c.post_id WHERE p.title LIKE 'flush %'`,
    )
    expect(stored).toHaveLength(12)
    for (const row of stored) {
      expect(shardOf(row.comment)).toBe(shardOf(row.author))
      expect(shardOf(row.post)).toBe(shardOf(row.author))
    }
  })

  it('points an existing entity at a new one of the same flush (an UPDATE with its new key), on its shard', async () => {
    const from = 'moved-from@example.com'
    /** The first `moved-to-<i>@example.com` on (or off) the shard of `from`. */
    const emailOf = (same: boolean) => {
      for (let i = 0; ; i++) {
        const email = `moved-to-${i}@example.com`
        if ((expectedShard(email, 64) === expectedShard(from, 64)) === same) return email
      }
    }
    const setup = asyncOrm.em.fork()
    const post = setup.create(Post, {
      author: setup.create(Author, { email: from }),
      title: 'moved',
    })
    await setup.flush()
    const em = asyncOrm.em.fork()
    const loaded = await em.findOneOrFail(Post, post.id)
    const newcomer = em.create(Author, { email: emailOf(true) })
    loaded.author = newcomer
    await em.flush()
    const [row] = await raw.query('SELECT author_id FROM posts WHERE id = $1', [post.id])
    expect(String(row?.author_id)).toBe(String(newcomer.id))
    // A new author on another shard: the post's ID cannot follow it.
    const other = asyncOrm.em.fork()
    const again = await other.findOneOrFail(Post, post.id)
    again.author = other.create(Author, { email: emailOf(false) })
    await expect(other.flush()).rejects.toBeInstanceOf(ShardKeyChangedError)
    const [after] = await raw.query('SELECT author_id FROM posts WHERE id = $1', [post.id])
    expect(String(after?.author_id)).toBe(String(newcomer.id))
  })

  it('refuses a flush with a missing shard key before writing or allocating anything', async () => {
    const em = asyncOrm.em.fork()
    em.create(Author, { email: 'kept-out@example.com' })
    em.create(Post, { title: 'orphan' } as Post)
    await expect(em.flush()).rejects.toBeInstanceOf(MissingShardKeyError)
    expect(async.idsIssued).toBe(0)
    expect(
      await count("SELECT COUNT(*) AS n FROM authors WHERE email = 'kept-out@example.com'"),
    ).toBe(0)
  })
})

describe.each([
  ['sync', () => syncOrm],
  ['async', () => asyncOrm],
] as const)('with a %s source and entities made with new', (kind, orm) => {
  it('cascades from a persisted child to its new parents, foreign keys and shards right', async () => {
    const em = orm().em.fork()
    const author = new Author()
    author.email = `cascade-${kind}@example.com`
    const post = new Post()
    post.author = author
    post.title = `cascade ${kind}`
    const comment = new Comment()
    comment.body = `cascade ${kind}`
    post.comments.add(comment)
    em.persist(comment)
    await em.flush()
    const [row] = await raw.query(
      'SELECT p.id AS post, p.author_id AS author, c.id AS comment FROM comments c JOIN posts p ON p.id = c.post_id WHERE c.body = $1',
      [`cascade ${kind}`],
    )
    expect(String(row?.author)).toBe(String(author.id))
    expect(String(row?.post)).toBe(String(post.id))
    const shard = expectedShard(author.email, 64)
    for (const id of [author.id, post.id, comment.id]) expect(shardOf(id)).toBe(shard)
  })
})

describe('sameShardAs through the foreign-key property or a function', () => {
  /** Posts whose rule names the scalar foreign key `authorId` (mapped to the relation's column). */
  const ByForeignKey = defineEntity({
    name: 'ByForeignKey',
    tableName: 'fk_posts',
    properties: {
      id: shardedId({ sameShardAs: 'authorId' }),
      author: () => p.manyToOne(Author),
      authorId: p.bigint().fieldName('author_id').persist(false).nullable(),
      title: p.string(),
    },
  })
  /** Comments whose rule is a function returning the parent entity. */
  const ByFunction = defineEntity({
    name: 'ByFunction',
    tableName: 'fn_comments',
    properties: {
      id: shardedId<{ post: unknown }>({ sameShardAs: (comment) => comment.post as object }),
      post: () => p.manyToOne(ByForeignKey),
      body: p.string(),
    },
  })

  it.each([
    ['sync', sync],
    ['async', async],
  ] as const)('places rows on their parent shard with a %s source', async (_, source) => {
    await raw.query(
      'CREATE TABLE IF NOT EXISTS fk_posts (id BIGINT PRIMARY KEY, author_id BIGINT NOT NULL REFERENCES authors, title TEXT NOT NULL)',
    )
    await raw.query(
      'CREATE TABLE IF NOT EXISTS fn_comments (id BIGINT PRIMARY KEY, post_id BIGINT NOT NULL REFERENCES fk_posts, body TEXT NOT NULL)',
    )
    const orm = await openOrm(
      'postgres',
      raw.url,
      [Author, ByForeignKey, ByFunction],
      [shardedIds({ source })],
    )
    try {
      const em = orm.em.fork()
      const author = em.create(Author, { email: `fk-${source === sync}@example.com` })
      const post = em.create(ByForeignKey, { author, title: 'by foreign key' })
      await em.flush()
      expect(shardOf(post.id)).toBe(shardOf(author.id))
      const parent = await orm.em.fork().findOneOrFail(ByForeignKey, post.id)
      const comment = em.create(ByFunction, { post: em.merge(parent), body: 'by function' })
      await em.flush()
      expect(shardOf(comment.id)).toBe(shardOf(author.id))
      const [row] = await raw.query('SELECT post_id FROM fn_comments WHERE id = $1', [comment.id])
      expect(String(row?.post_id)).toBe(String(post.id))
    } finally {
      await orm.close(true)
    }
  })
})

describe('sameShardAs rules that lead back to the entity', () => {
  /** Two new entities whose rules name each other, neither with an ID yet: no shard to read. */
  const CycleA = defineEntity({
    name: 'CycleA',
    tableName: 'cycle_a',
    properties: {
      id: shardedId<{ partner: unknown }>({ sameShardAs: (row) => row.partner as object }),
      partner: () => p.manyToOne(CycleB).nullable(),
    },
  })
  const CycleB = defineEntity({
    name: 'CycleB',
    tableName: 'cycle_b',
    properties: {
      id: shardedId<{ partner: unknown }>({ sameShardAs: (row) => row.partner as object }),
      partner: () => p.manyToOne(CycleA).nullable(),
    },
  })

  it('refuses the flush with a ConfigurationError naming the cycle, writing nothing', async () => {
    const orm = await openOrm(
      'postgres',
      raw.url,
      [CycleA, CycleB],
      [shardedIds({ source: async })],
    )
    try {
      const em = orm.em.fork()
      const a = em.create(CycleA, {})
      const b = em.create(CycleB, { partner: a })
      a.partner = b
      await expect(em.flush()).rejects.toThrow(/form a cycle/)
      expect(async.idsIssued).toBe(0)
    } finally {
      await orm.close(true)
    }
  })
})
