/**
 * The insert paths besides flush: em.upsert, em.insert / insertMany / query-builder inserts with
 * assignShardedIds, prefetching sources; and the key forms (string keys, shard functions, fixed
 * shards, plain keys through a relation to an autoincrement entity).
 */
import {
  defineEntity,
  type MikroORM,
  NotNullConstraintViolationException,
  p,
  wrap,
} from '@mikro-orm/core'
import { Entity, Property } from '@mikro-orm/decorators/legacy'
import type { SqlEntityManager } from '@mikro-orm/postgresql'
import {
  asAsync,
  blogSchemaSql,
  CountingSource,
  expectedShard,
  freshDatabase,
  type RawDatabase,
  testSharding,
} from '@shardflake/conformance'
import {
  ConfigurationError,
  InProcessSource,
  PrefetchSource,
  ShardKeyChangedError,
} from '@shardflake/core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { assignShardedIds, shardedId, shardedIds } from '../src'
import { ShardedId } from '../src/legacy'
import { ShardedId as ShardedIdV6 } from '../src/v6'
import { openOrm } from './support/blog'
import { Author, Comment, Keyed, Post } from './support/entities-legacy'

const sharding = testSharding(64)

/** A note: a string key from a shard function. */
const Note = defineEntity({
  name: 'Note',
  tableName: 'notes',
  properties: {
    id: shardedId<{ owner: bigint }>({ shardBy: (note) => note.owner, idType: 'string' }),
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
  @ShardedId<Tag>({ shardBy: (tag) => tag.label.toLowerCase(), idType: 'string' }) id!: string
  @Property({ type: 'string' }) label!: string
}
/** Tenants keep BIGSERIAL keys; invoices are sharded by their tenant's key (a plain key). */
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
  'CREATE TABLE tags (id BIGINT NOT NULL PRIMARY KEY, label TEXT NOT NULL)',
  'CREATE TABLE tenants (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL)',
  'CREATE TABLE invoices (id BIGINT NOT NULL PRIMARY KEY, tenant_id BIGINT NOT NULL REFERENCES tenants, total INT NOT NULL)',
  'CREATE TABLE notes (id BIGINT NOT NULL PRIMARY KEY, owner BIGINT NOT NULL, body TEXT NOT NULL)',
  'CREATE TABLE audits (id BIGINT NOT NULL PRIMARY KEY, body TEXT NOT NULL)',
]
const entities = [Author, Post, Comment, Keyed, Note, Audit, Tenant, Invoice, Tag]

const inProcess = new InProcessSource({ sharding, shards: 'all' })
const sync = new CountingSource(inProcess)
const async = new CountingSource(asAsync(inProcess))
let raw: RawDatabase
let syncOrm: MikroORM
let asyncOrm: MikroORM

beforeAll(async () => {
  raw = await freshDatabase('postgres', 'sf_mikro_inserts')
  for (const sql of [...blogSchemaSql('postgres'), ...extraSchema]) await raw.query(sql)
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

describe('key forms', () => {
  it('serves string keys, shard functions and fixed shards', async () => {
    const em = syncOrm.em.fork()
    const note = em.create(Note, { owner: 4242n, body: 'string key' })
    const audit = em.create(Audit, { body: 'fixed' })
    await em.flush()
    expect(typeof note.id).toBe('string')
    expect(shardOf(note.id)).toBe(4242 % 64)
    expect(shardOf(audit.id)).toBe(5)
  })

  it('gives a decorated string key from a shard function, written to JSON as a string', async () => {
    const em = syncOrm.em.fork()
    const tag = em.create(Tag, { label: 'Sharding' })
    await em.flush()
    expect(typeof tag.id).toBe('string')
    expect(shardOf(tag.id)).toBe(expectedShard('sharding', 64))
    expect(JSON.parse(JSON.stringify(wrap(tag).toJSON())).id).toBe(tag.id)
  })

  it("shards by a relation to an autoincrement entity with that entity's key", async () => {
    const em = syncOrm.em.fork()
    const tenant = em.create(Tenant, { name: 'acme' })
    await em.flush()
    const invoice = em.create(Invoice, { tenant, total: 12 })
    await em.flush()
    expect(shardOf(invoice.id)).toBe(Number(tenant.id % 64n))
  })

  it('declares every form of the key as a BIGINT that the database does not generate', async () => {
    const sql = await syncOrm.schema.getCreateSchemaSQL({ wrap: false })
    for (const table of ['authors', 'posts', 'comments', 'notes', 'audits', 'invoices', 'tags']) {
      expect(sql).toMatch(new RegExp(`create table "${table}" \\("id" bigint not null`))
    }
    expect(sql.match(/bigserial/g)).toHaveLength(1) // tenants
  })
})

describe('em.upsert', () => {
  it.each([
    ['sync', () => syncOrm],
    ['async', () => asyncOrm],
  ] as const)(
    'takes an ID from a %s source, and keeps the stored one on conflict',
    async (kind, orm) => {
      const email = `upsert-${kind}@example.com`
      const first = await orm()
        .em.fork()
        .upsert(Author, { email }, { onConflictFields: ['email'] })
      const again = await orm()
        .em.fork()
        .upsert(Author, { email }, { onConflictFields: ['email'] })
      expect(typeof first.id).toBe('bigint')
      expect(String(again.id)).toBe(String(first.id))
      expect(shardOf(first.id)).toBe(expectedShard(email, 64))
    },
  )
})

describe('em.upsert of an entity from em.create()', () => {
  /** Two emails on different shards. */
  const emailsOnTwoShards = (tag: string) => {
    const first = `${tag}-a@example.com`
    for (let i = 0; ; i++) {
      const second = `${tag}-b${i}@example.com`
      if (expectedShard(second, 64) !== expectedShard(first, 64)) return [first, second] as const
    }
  }
  const stored = async (email: string) =>
    (await raw.query(`SELECT id::text AS id FROM authors WHERE email = $1`, [email])).map((row) =>
      String(row.id),
    )

  it('refuses one whose key moved it to another shard since (nothing written); a flush re-keys it', async () => {
    const [first, second] = emailsOnTwoShards('upsert-moved')
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email: first })
    author.email = second
    await expect(em.upsert(author)).rejects.toThrow(ShardKeyChangedError)
    expect(await stored(second)).toEqual([])
    await em.flush()
    const [id] = await stored(second)
    expect(shardOf(BigInt(id!))).toBe(expectedShard(second, 64))
  })

  it('upserts one whose key still gives its shard', async () => {
    const [email] = emailsOnTwoShards('upsert-kept')
    const em = syncOrm.em.fork()
    const author = em.create(Author, { email })
    await em.upsert(author)
    const [id] = await stored(email)
    expect(id).toBe(String(author.id))
    expect(shardOf(BigInt(id!))).toBe(expectedShard(email, 64))
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
    for (const row of await raw.query(
      "SELECT p.id FROM posts p JOIN authors a ON a.id = p.author_id WHERE a.email = 'bulk@example.com'",
    )) {
      expect(shardOf(row.id)).toBe(shardOf(author!.id))
    }
    const [comment] = await raw.query("SELECT id FROM comments WHERE body = 'through qb'")
    expect(shardOf(comment?.id)).toBe(shardOf(author!.id))
  })

  it('hand out the IDs of a synchronous source ascending in row order (an appending INSERT)', async () => {
    // The in-process source itself (the counting wrapper above cannot order a batch).
    const orm = await openOrm('postgres', raw.url, entities, [shardedIds({ source: inProcess })])
    try {
      inProcess.nextId(0)
      await new Promise((resolve) => setTimeout(resolve, 300))
      const em = orm.em.fork() as SqlEntityManager
      const emails = Array.from({ length: 200 }, (_, i) => `rising-${(i * 7919) % 200}@example.com`)
      const shards = emails.map((email) => expectedShard(email, 64))
      expect(shards.filter((shard, i) => i > 0 && shard < shards[i - 1]!).length).toBeGreaterThan(
        50,
      )
      const rows = await assignShardedIds(
        em,
        Author,
        emails.map((email) => ({ email })),
      )
      const ids = rows.map((row) => BigInt(String(row.id)))
      for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `row ${i}`).toBe(true)
      await em.insertMany(Author, rows)
      const stored = await raw.query(
        "SELECT id::text AS id, email FROM authors WHERE email LIKE 'rising-%'",
      )
      expect(stored).toHaveLength(200)
      for (const row of stored) expect(shardOf(row.id)).toBe(expectedShard(String(row.email), 64))
    } finally {
      await orm.close(true)
    }
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

it('serves small flushes from a PrefetchSource: one round trip for several flushes', async () => {
  const author = await syncOrm.em.fork().upsert(Author, { email: 'prefetched@example.com' })
  const orm = await openOrm('postgres', raw.url, entities, [
    shardedIds({ source: new PrefetchSource(async, { size: 25, maxAgeMs: 60_000 }) }),
  ])
  try {
    async.reset()
    const ids: bigint[] = []
    for (let flush = 0; flush < 10; flush++) {
      const em = orm.em.fork()
      const posts = [0, 1, 2, 3, 4].map((i) =>
        em.create(Post, { author: em.getReference(Author, author.id), title: `pf ${flush}.${i}` }),
      )
      await em.flush()
      ids.push(...posts.map((post) => post.id))
    }
    expect(new Set(ids).size).toBe(50)
    for (const id of ids) expect(shardOf(id)).toBe(shardOf(author.id))
    // 25 IDs per round trip serve five flushes of 5; the buffer refills ahead, so a third may be out
    expect(async.nextIdsCalls).toBeGreaterThanOrEqual(2)
    expect(async.nextIdsCalls).toBeLessThanOrEqual(3)
  } finally {
    await orm.close(true)
  }
})

it('refuses to create a sharded entity when MikroORM has no shardedIds()', async () => {
  const orm = await openOrm('postgres', raw.url, entities, [])
  try {
    expect(() => orm.em.fork().create(Author, { email: 'nobody@example.com' })).toThrow(
      ConfigurationError,
    )
  } finally {
    await orm.close(true)
  }
})

it('refuses the MikroORM 6 decorator on MikroORM 7, pointing to /legacy', () => {
  expect(() => ShardedIdV6({ shardBy: 'email' })).toThrow(/@shardflake\/mikro-orm\/legacy/)
})
