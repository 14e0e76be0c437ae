import {
  defineEntity,
  type MikroORM,
  NotNullConstraintViolationException,
  p,
  type RequiredEntityData,
  wrap,
} from '@mikro-orm/core'
import { Entity, Property } from '@mikro-orm/decorators/legacy'
import type { SqlEntityManager } from '@mikro-orm/postgresql'
import {
  blogSchemaSql,
  CountingSource,
  freshDatabase,
  type RawDatabase,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  hashShard,
  InProcessSource,
  instagram,
  MissingShardKeyError,
  PrefetchSource,
} from '@shardflake/core'
import { installPostgres, PostgresSource } from '@shardflake/postgres'
import pg from 'pg'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { assignShardedIds, shardedId, shardedIds } from '../src'
import { ShardedId } from '../src/legacy'
import { ShardedId as ShardedIdV6 } from '../src/v6'
import { AsyncSource } from './support/async-source'
import { openOrm } from './support/blog'
import { Author, Comment, Post } from './support/entities-legacy'

const logicalShards = 64

/** A note: string keys, a shard function, and a fixed-shard audit entry. */
const Note = defineEntity({
  name: 'Note',
  tableName: 'notes',
  properties: {
    id: shardedId<{ owner: bigint }>({ shardBy: (note) => note.owner, mode: 'string' }),
    owner: p.bigint(),
    body: p.string(),
  },
})
const Audit = defineEntity({
  name: 'Audit',
  tableName: 'audits',
  properties: { id: shardedId({ shard: 5 }), body: p.string() },
})
/** A decorated entity with a string key from a typed shard function. */
@Entity({ tableName: 'tags' })
class Tag {
  @ShardedId<Tag>({ shardBy: (tag) => tag.label.toLowerCase(), mode: 'string' }) id!: string
  @Property({ type: 'string' }) label!: string
}

/** Tenants keep BIGSERIAL keys; invoices are sharded by their tenant's key. */
const Tenant = defineEntity({
  name: 'Tenant',
  tableName: 'tenants',
  properties: { id: p.bigint().primary(), name: p.string() },
})
const Invoice = defineEntity({
  name: 'Invoice',
  tableName: 'invoices',
  properties: {
    id: shardedId({ shardBy: 'tenant' }),
    tenant: () => p.manyToOne(Tenant),
    total: p.integer(),
  },
})
const extraSchema = [
  'DROP TABLE IF EXISTS tags',
  'CREATE TABLE tags (id BIGINT NOT NULL PRIMARY KEY, label TEXT NOT NULL)',
  'DROP TABLE IF EXISTS invoices',
  'DROP TABLE IF EXISTS tenants',
  'CREATE TABLE tenants (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)',
  'CREATE TABLE invoices (id BIGINT NOT NULL PRIMARY KEY, tenant_id BIGINT NOT NULL REFERENCES tenants, total INT NOT NULL)',
  'DROP TABLE IF EXISTS notes',
  'DROP TABLE IF EXISTS audits',
  'CREATE TABLE notes (id BIGINT NOT NULL PRIMARY KEY, owner BIGINT NOT NULL, body TEXT NOT NULL)',
  'CREATE TABLE audits (id BIGINT NOT NULL PRIMARY KEY, body TEXT NOT NULL)',
]
const entities = [Author, Post, Comment, Note, Audit, Tenant, Invoice, Tag]

let raw: RawDatabase
const inProcess = new InProcessSource({ layout: instagram, shards: 'all' })
const sync = new CountingSource(inProcess, logicalShards)
const async = new CountingSource(new AsyncSource(inProcess), logicalShards)
let syncOrm: MikroORM
let asyncOrm: MikroORM

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro_unit')
  for (const sql of [...blogSchemaSql('postgres'), ...extraSchema]) await raw.query(sql)
  syncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: sync })])
  asyncOrm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: async })])
})
afterAll(async () => {
  await syncOrm?.close(true)
  await asyncOrm?.close(true)
  await raw?.close()
})
beforeEach(() => {
  sync.reset()
  async.reset()
})

const count = async (sql: string, params: unknown[] = []) =>
  Number((await raw.query(sql, params))[0]?.n)

describe('with an in-process (sync) source', () => {
  it('gives the ID at em.create(), before the flush, under which the identity map holds it', async () => {
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: 'early@example.com' })
    expect(typeof author.id).toBe('bigint')
    expect(instagram.shardOf(author.id)).toBe(hashShard('early@example.com', logicalShards))
    expect(em.getUnitOfWork().getById(Author, author.id)).toBe(author)
    expect(em.getReference(Author, author.id)).toBe(author)
    const post = em.create(Post, { author, title: 'early post' })
    expect(instagram.shardOf(post.id)).toBe(instagram.shardOf(author.id))
    expect(await count('SELECT COUNT(*) AS n FROM authors WHERE id = $1', [author.id])).toBe(0)
    await em.flush()
    expect(
      await count('SELECT COUNT(*) AS n FROM posts WHERE id = $1 AND author_id = $2', [
        post.id,
        author.id,
      ]),
    ).toBe(1)
  })

  it('assigns at flush an entity made with new and persisted later, its shard key set after creation', async () => {
    const em = syncOrm.em.fork()
    const author = new Author()
    author.email = 'late@example.com'
    em.persist(author)
    const post = em.create(Post, { title: 'author later' } as Post)
    expect(post.id).toBeUndefined()
    post.author = author
    await em.flush()
    expect(instagram.shardOf(author.id)).toBe(hashShard('late@example.com', logicalShards))
    expect(instagram.shardOf(post.id)).toBe(instagram.shardOf(author.id))
    const [row] = await raw.query('SELECT author_id FROM posts WHERE id = $1', [post.id])
    expect(String(row?.author_id)).toBe(String(author.id))
  })

  it('serves string keys, shard functions and fixed shards', async () => {
    const em = syncOrm.em.fork()
    const note = em.create(Note, { owner: 4242n, body: 'string key' })
    const audit = em.create(Audit, { body: 'fixed' })
    await em.flush()
    expect(typeof note.id).toBe('string')
    expect(instagram.shardOf(note.id)).toBe(Number(4242n % BigInt(logicalShards)))
    expect(instagram.shardOf(audit.id)).toBe(5)
    const [row] = await raw.query('SELECT id::text AS id FROM notes WHERE body = $1', [
      'string key',
    ])
    expect(row?.id).toBe(note.id)
  })

  it('gives a decorated string key from a shard function, written to JSON as a string', async () => {
    const em = syncOrm.em.fork()
    const tag = em.create(Tag, { label: 'Sharding' })
    await em.flush()
    expect(typeof tag.id).toBe('string')
    expect(instagram.shardOf(tag.id)).toBe(hashShard('sharding', logicalShards))
    expect(JSON.parse(JSON.stringify(wrap(tag).toJSON())).id).toBe(tag.id)
    const [row] = await raw.query('SELECT id::text AS id FROM tags')
    expect(row?.id).toBe(tag.id)
  })

  it("shards by a relation to an autoincrement entity with that entity's key", async () => {
    const em = syncOrm.em.fork()
    const tenant = em.create(Tenant, { name: 'acme' })
    await em.flush()
    const invoice = em.create(Invoice, { tenant, total: 12 })
    await em.flush()
    expect(instagram.shardOf(invoice.id)).toBe(Number(tenant.id % BigInt(logicalShards)))
  })

  it('upserts with the ID onCreate gave, and keeps the stored ID on conflict', async () => {
    const em = syncOrm.em.fork()
    const first = await em.upsert(
      Author,
      { email: 'upsert@example.com' },
      { onConflictFields: ['email'] },
    )
    const again = await syncOrm.em
      .fork()
      .upsert(Author, { email: 'upsert@example.com' }, { onConflictFields: ['email'] })
    expect(String(again.id)).toBe(String(first.id))
    expect(await count('SELECT COUNT(*) AS n FROM authors WHERE id = $1', [first.id])).toBe(1)
  })
})

describe.each([
  ['sync', () => syncOrm],
  ['async', () => asyncOrm],
] as const)('with a %s source and entities made with new', (kind, orm) => {
  it('cascades from a persisted child to its new parent, foreign key and shards right', async () => {
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
    expect(String(row?.comment)).toBe(String(comment.id))
    const shard = hashShard(author.email, logicalShards)
    for (const id of [author.id, post.id, comment.id]) expect(instagram.shardOf(id)).toBe(shard)
  })
})

describe('with an async (database-like) source', () => {
  it('assigns a whole flush in one nextIds per shard, with children carrying their parent keys', async () => {
    const em = asyncOrm.em.fork()
    const authors = ['a1@example.com', 'a2@example.com', 'a3@example.com'].map((email) =>
      em.create(Author, { email }),
    )
    expect(authors[0]!.id).toBeUndefined()
    const posts = authors.flatMap((author, a) =>
      [0, 1].map((i) =>
        em.create(Post, {
          author,
          title: `flush ${a}.${i}`,
          comments: [{ body: `c ${a}.${i}` }, { body: `d ${a}.${i}` }],
        } as RequiredEntityData<Post>),
      ),
    )
    await em.flush()
    const shards = new Set(authors.map((author) => hashShard(author.email, logicalShards)))
    expect(async.nextIdCalls).toBe(0)
    expect(async.nextIdsCalls).toBe(shards.size)
    expect(async.idsIssued).toBe(3 + 6 + 12)
    const stored = await raw.query(
      `SELECT c.id AS comment, c.post_id AS post, p.author_id AS author FROM comments c
       JOIN posts p ON p.id = c.post_id WHERE p.title LIKE 'flush %'`,
    )
    expect(stored).toHaveLength(12)
    for (const row of stored) {
      expect(instagram.shardOf(String(row.comment))).toBe(instagram.shardOf(String(row.author)))
      expect(instagram.shardOf(String(row.post))).toBe(instagram.shardOf(String(row.author)))
    }
    expect(new Set(posts.map((post) => post.author.id))).toEqual(new Set(authors.map((a) => a.id)))
    expect(em.getUnitOfWork().getById(Post, posts[0]!.id)).toBe(posts[0])
  })

  it('points an existing entity at a new one of the same flush (an UPDATE with its new key)', async () => {
    const setup = asyncOrm.em.fork()
    const author = setup.create(Author, { email: 'moved-from@example.com' })
    const post = setup.create(Post, { author, title: 'to be moved' })
    await setup.flush()
    const em = asyncOrm.em.fork()
    const loaded = await em.findOneOrFail(Post, post.id)
    const newcomer = em.create(Author, { email: 'moved-to@example.com' })
    loaded.author = newcomer
    await em.flush()
    const [row] = await raw.query('SELECT author_id FROM posts WHERE id = $1', [post.id])
    expect(String(row?.author_id)).toBe(String(newcomer.id))
    expect(instagram.shardOf(newcomer.id)).toBe(hashShard('moved-to@example.com', logicalShards))
  })

  it('refuses a flush with a missing shard key before writing or allocating anything', async () => {
    const em = asyncOrm.em.fork()
    const author = em.create(Author, { email: 'kept-out@example.com' })
    em.create(Post, { title: 'orphan' } as Post)
    await expect(em.flush()).rejects.toBeInstanceOf(MissingShardKeyError)
    expect(async.idsIssued).toBe(0)
    expect(
      await count("SELECT COUNT(*) AS n FROM authors WHERE email = 'kept-out@example.com'"),
    ).toBe(0)
    expect(author.id).toBeUndefined()
  })

  it('upserts with an ID from the source, and keeps the stored ID on conflict', async () => {
    const first = await asyncOrm.em
      .fork()
      .upsert(Author, { email: 'async-upsert@example.com' }, { onConflictFields: ['email'] })
    const again = await asyncOrm.em
      .fork()
      .upsert(Author, { email: 'async-upsert@example.com' }, { onConflictFields: ['email'] })
    expect(typeof first.id).toBe('bigint')
    expect(String(again.id)).toBe(String(first.id))
    expect(instagram.shardOf(first.id)).toBe(hashShard('async-upsert@example.com', logicalShards))
  })
})

describe('with prefetching in front of an async source', () => {
  /** Ten flushes of 5 posts by one author; returns the posts' IDs in flush order. */
  async function tenFlushes(orm: MikroORM, tag: string): Promise<bigint[]> {
    const author = await syncOrm.em.fork().upsert(Author, { email: `${tag}@example.com` })
    async.reset()
    const ids: bigint[] = []
    for (let flush = 0; flush < 10; flush++) {
      const em = orm.em.fork()
      const posts = [0, 1, 2, 3, 4].map((i) =>
        em.create(Post, {
          author: em.getReference(Author, author.id),
          title: `${tag} ${flush}.${i}`,
        }),
      )
      await em.flush()
      ids.push(...posts.map((post) => post.id))
    }
    expect(new Set(ids).size).toBe(50)
    expect(ids.every((id, i) => i === 0 || id > ids[i - 1]!)).toBe(true)
    for (const id of ids) expect(instagram.shardOf(id)).toBe(instagram.shardOf(author.id))
    const rows = await raw.query(
      'SELECT p.id::text AS id FROM posts p WHERE p.title LIKE $1 AND p.author_id = $2 ORDER BY p.id',
      [`${tag} %`, author.id],
    )
    expect(rows.map((row) => BigInt(String(row.id)))).toEqual(ids)
    return ids
  }

  it('serves small flushes from a PrefetchSource: one round trip for several flushes', async () => {
    const orm = await openOrm('postgres', raw.url, entities, [
      shardedIds({ source: new PrefetchSource(async, { size: 25, maxAgeMs: 60_000 }) }),
    ])
    try {
      await tenFlushes(orm, 'prefetched')
      expect(async.nextIdsCalls).toBe(2) // 25 IDs serve five flushes of 5: 50 posts
      expect(async.idsIssued).toBe(50)
    } finally {
      await orm.close(true)
    }
  })

  it("works with PostgresSource's own prefetch option (next_ids() in the database)", async () => {
    const pool = new pg.Pool({ connectionString: raw.url, max: 4 })
    try {
      await installPostgres(pool, { layout: instagram, shards: `0-${logicalShards - 1}` })
      const source = new PostgresSource({
        layout: instagram,
        databases: pool,
        logicalShards,
        prefetch: { size: 25, maxAgeMs: 60_000 },
      })
      const orm = await openOrm('postgres', raw.url, entities, [shardedIds({ source })])
      try {
        await tenFlushes(orm, 'pg-prefetched')
      } finally {
        await orm.close(true)
      }
    } finally {
      await pool.end()
    }
  })
})

describe('em.insert, em.insertMany and query-builder inserts', () => {
  it('take IDs from assignShardedIds, one nextIds per shard, relations given as keys', async () => {
    const em = asyncOrm.em.fork() as SqlEntityManager
    const [author] = await assignShardedIds(em, Author, [{ email: 'bulk@example.com' }])
    await em.insert(Author, author!)
    const rows = await assignShardedIds(
      em,
      Post,
      Array.from({ length: 5 }, (_, i) => ({ author: author!.id!, title: `bulk ${i}` })),
    )
    expect(async.nextIdsCalls).toBe(2)
    await em.insertMany(Post, rows)
    const qbRow = await assignShardedIds(em, Comment, { post: rows[0]!.id!, body: 'through qb' })
    await em.createQueryBuilder(Comment).insert(qbRow).execute()
    const stored = await raw.query(
      "SELECT p.id FROM posts p JOIN authors a ON a.id = p.author_id WHERE a.email = 'bulk@example.com'",
    )
    expect(stored.map((row) => String(row.id)).sort()).toEqual(
      rows.map((row) => String(row.id)).sort(),
    )
    for (const row of stored)
      expect(instagram.shardOf(String(row.id))).toBe(instagram.shardOf(String(author!.id)))
    const [comment] = await raw.query("SELECT id, post_id FROM comments WHERE body = 'through qb'")
    expect(instagram.shardOf(String(comment?.id))).toBe(instagram.shardOf(String(author!.id)))
  })

  it('fail loudly on the NOT NULL key when the IDs were forgotten', async () => {
    const em = asyncOrm.em.fork()
    await expect(em.insert(Author, { email: 'forgotten@example.com' })).rejects.toBeInstanceOf(
      NotNullConstraintViolationException,
    )
    expect(
      await count("SELECT COUNT(*) AS n FROM authors WHERE email = 'forgotten@example.com'"),
    ).toBe(0)
  })
})

it('refuses to create a sharded entity when no shardedIds() subscriber is registered', async () => {
  const orm = await openOrm('postgres', raw.url, entities, [])
  try {
    expect(() => orm.em.fork().create(Author, { email: 'nobody@example.com' })).toThrow(
      ConfigurationError,
    )
  } finally {
    await orm.close(true)
  }
})

it('declares every form of the key as a BIGINT that the database does not generate', async () => {
  const sql = await syncOrm.schema.getCreateSchemaSQL({ wrap: false })
  for (const table of ['authors', 'posts', 'comments', 'notes', 'audits', 'invoices', 'tags']) {
    const create = new RegExp(`create table "${table}" \\("id" bigint not null`)
    expect(sql).toMatch(create)
  }
  expect(sql).toMatch(/create table "tenants" \("id" bigserial/)
  expect(sql.match(/bigserial/g)).toHaveLength(1)
})

it('refuses the MikroORM 6 decorator on MikroORM 7, pointing to /legacy', () => {
  expect(() => ShardedIdV6({ shardBy: 'email' })).toThrow(ConfigurationError)
  expect(() => ShardedIdV6({ shardBy: 'email' })).toThrow(/@shardflake\/mikro-orm\/legacy/)
})
